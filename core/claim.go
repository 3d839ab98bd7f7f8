package outbox

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// maxNodeIDLen bounds a node ID, in bytes, so that a claim token ("<node ID>/<ULID>")
// fits MaxClaimTokenLen.
const maxNodeIDLen = 96

// validateNodeID reports whether id can own claims: 1 to maxNodeIDLen bytes of printable
// ASCII other than space and '/'. It returns a *[ConfigError] with Field "NodeID" when
// it cannot.
func validateNodeID(id string) error {
	if id == "" {
		return &ConfigError{Field: "NodeID", Reason: "is empty"}
	}
	if len(id) > maxNodeIDLen {
		return &ConfigError{Field: "NodeID", Reason: fmt.Sprintf("%d bytes, more than %d", len(id), maxNodeIDLen)}
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return &ConfigError{Field: "NodeID", Reason: fmt.Sprintf("%q: byte %d is not printable ASCII other than space and '/'", id, i)}
		}
	}
	return nil
}

// defaultNodeID returns a node ID for this process: "<host>-<pid>-<random>", the host
// name (sanitised and shortened to fit) followed by the process ID and six random
// characters, so that two processes, or two Outbox values in one process, never share
// one. [New] calls it when [Config.NodeID] is empty.
func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	var sb strings.Builder
	for i := 0; i < len(host) && sb.Len() < 64; i++ {
		c := host[i]
		if c <= ' ' || c > '~' || c == '/' {
			c = '_'
		}
		sb.WriteByte(c)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	for i := range rnd {
		rnd[i] = crockford[rnd[i]%32]
	}
	return sb.String() + "-" + strconv.Itoa(os.Getpid()) + "-" + strings.ToLower(string(rnd[:]))
}

// newClaimToken returns a fresh claim token owned by nodeID: "<nodeID>/<ULID>". Every
// claim, and every pre-claimed write batch, gets its own, so that an outcome can only be
// recorded by the holder of the claim that is current. nodeID should pass
// validateNodeID.
func newClaimToken(nodeID string) string { return nodeID + "/" + NewID() }

// claimOwner returns the node ID part of a claim token made by newClaimToken, or the
// whole token when it has no '/'.
func claimOwner(token string) string {
	if i := strings.LastIndexByte(token, '/'); i >= 0 {
		return token[:i]
	}
	return token
}
