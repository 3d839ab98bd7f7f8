package ids

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// MaxNodeIDLen bounds a node ID, in bytes, so that a claim token ("<node ID>/<ULID>")
// fits MaxClaimTokenLen.
const MaxNodeIDLen = 96

// ValidateNodeID reports whether id can own claims: 1 to MaxNodeIDLen bytes of printable
// ASCII other than space and '/'. It returns a *[outboxtype.ConfigError] with Field "NodeID" when
// it cannot.
func ValidateNodeID(id string) error {
	if id == "" {
		return &outboxtype.ConfigError{Field: "NodeID", Reason: "is empty"}
	}
	if len(id) > MaxNodeIDLen {
		return &outboxtype.ConfigError{Field: "NodeID", Reason: fmt.Sprintf("%d bytes, more than %d", len(id), MaxNodeIDLen)}
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return &outboxtype.ConfigError{Field: "NodeID", Reason: fmt.Sprintf("%q: byte %d is not printable ASCII other than space and '/'", id, i)}
		}
	}
	return nil
}

// DefaultNodeID returns a node ID for this process: "<host>-<pid>-<random>", the host
// name (sanitised and shortened to fit) followed by the process ID and six random
// characters, so that two processes, or two Outbox values in one process, never share
// one. outbox.New calls it when Config.NodeID is empty.
func DefaultNodeID() string {
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

// NewClaimToken returns a fresh claim token owned by nodeID: "<nodeID>/<ULID>". Every
// claim, and every pre-claimed write batch, gets its own, so that an outcome can only be
// recorded by the holder of the claim that is current. nodeID should pass
// ValidateNodeID.
func NewClaimToken(nodeID string) string { return nodeID + "/" + New() }

// ClaimOwner returns the node ID part of a claim token made by NewClaimToken, or the
// whole token when it has no '/'.
func ClaimOwner(token string) string {
	if i := strings.LastIndexByte(token, '/'); i >= 0 {
		return token[:i]
	}
	return token
}
