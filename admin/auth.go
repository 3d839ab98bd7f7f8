package outboxadmin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	outbox "github.com/outboxkit/outbox/core"
)

// Authorizer decides whether a request may use the admin API. Implementations must be
// safe for concurrent use. Use [BearerToken], [AuthorizerFunc] or [AllowAll].
type Authorizer interface {
	// Authorize reports whether r may proceed. It must not write to a response.
	Authorize(r *http.Request) bool
}

// AuthorizerFunc adapts a function to [Authorizer], for checks the application already
// has: a session cookie, a header set by an authenticating proxy, a client certificate.
//
//	outboxadmin.AuthorizerFunc(func(r *http.Request) bool { return isAdmin(r) })
//
// A nil AuthorizerFunc is rejected by [New].
type AuthorizerFunc func(r *http.Request) bool

// Authorize calls f(r).
func (f AuthorizerFunc) Authorize(r *http.Request) bool { return f(r) }

// BearerToken returns an [Authorizer] that accepts requests carrying
// "Authorization: Bearer <token>" and compares the token in constant time. [New]
// rejects an empty token, and one with characters a header cannot carry (anything but
// printable ASCII without spaces). A token of 128 random bits or more, such as
// crypto/rand.Text(), is what it is meant for.
func BearerToken(token string) Authorizer {
	return bearerToken{sum: sha256.Sum256([]byte(token)), valid: validToken(token)}
}

type bearerToken struct {
	sum   [sha256.Size]byte
	valid bool
}

// Authorize implements Authorizer. Comparing digests keeps the time independent of the
// token's length as well as its content.
func (b bearerToken) Authorize(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimLeft(token, " ")))
	return b.valid && subtle.ConstantTimeCompare(got[:], b.sum[:]) == 1
}

// validToken reports whether token can be sent in an Authorization header as is.
func validToken(token string) bool {
	if token == "" {
		return false
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// AllowAll returns an [Authorizer] that lets every request through. It is for local
// development on a loopback address; [New] logs a warning when it is used.
func AllowAll() Authorizer { return allowAll{} }

type allowAll struct{}

// Authorize implements Authorizer.
func (allowAll) Authorize(*http.Request) bool { return true }

// validAuthorizer rejects authorizers that can never work.
func validAuthorizer(a Authorizer) error {
	switch a := a.(type) {
	case bearerToken:
		if !a.valid {
			return &outbox.ConfigError{Field: "Authorize", Reason: "BearerToken needs a non-empty token of printable ASCII without spaces"}
		}
	case AuthorizerFunc:
		if a == nil {
			return &outbox.ConfigError{Field: "Authorize", Reason: "AuthorizerFunc is nil"}
		}
	}
	return nil
}
