package outboxadmin_test

import (
	"errors"
	"log/slog"
	"net/http"
	"testing"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/internal/admintest"
)

// TestAPI runs the shared conformance suite on a plain ServeMux, under a prefix with
// http.StripPrefix and at the root.
func TestAPI(t *testing.T) {
	t.Parallel()
	for name, prefix := range map[string]string{"prefix": "/outbox/admin", "root": ""} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			admintest.Run(t, admintest.ServeMux(prefix))
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	dead := deadEventsOver(t, outboxtest.NewMemoryStore())
	quiet := slog.New(slog.DiscardHandler)
	cases := []struct {
		name  string
		dead  outboxadmin.DeadEvents
		opts  outboxadmin.Options
		field string
	}{
		{"nil dead events", nil, outboxadmin.Options{Authorize: outboxadmin.AllowAll()}, "dead"},
		{"typed nil dead events", (*outbox.DeadEvents)(nil), outboxadmin.Options{Authorize: outboxadmin.AllowAll()}, "dead"},
		{"empty bearer token", dead, outboxadmin.Options{Authorize: outboxadmin.BearerToken("")}, "Authorize"},
		{"bearer token with a space", dead, outboxadmin.Options{Authorize: outboxadmin.BearerToken("a b")}, "Authorize"},
		{"bearer token with a newline", dead, outboxadmin.Options{Authorize: outboxadmin.BearerToken("ab\n")}, "Authorize"},
		{"bearer token not ASCII", dead, outboxadmin.Options{Authorize: outboxadmin.BearerToken("jeton-é")}, "Authorize"},
		{"nil AuthorizerFunc", dead, outboxadmin.Options{Authorize: outboxadmin.AuthorizerFunc(nil)}, "Authorize"},
		{"negative batch", dead, outboxadmin.Options{Authorize: outboxadmin.AllowAll(), ReplayBatchSize: -1}, "ReplayBatchSize"},
		{"origin with a path", dead, outboxadmin.Options{Authorize: outboxadmin.AllowAll(), TrustedOrigins: []string{"https://a.example/x"}}, "TrustedOrigins"},
		{"origin without scheme", dead, outboxadmin.Options{Authorize: outboxadmin.AllowAll(), TrustedOrigins: []string{"a.example"}}, "TrustedOrigins"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.opts.Logger = quiet
			h, err := outboxadmin.New(c.dead, c.opts)
			var ce *outbox.ConfigError
			if h != nil || !errors.As(err, &ce) || !errors.Is(err, outbox.ErrInvalidConfig) || ce.Field != c.field {
				t.Fatalf("New = %v, %v; want a *outbox.ConfigError for %s", h, err, c.field)
			}
		})
	}
	for _, opts := range []outboxadmin.Options{
		{},
		{Authorize: outboxadmin.BearerToken("x")},
		{Authorize: outboxadmin.AuthorizerFunc(func(*http.Request) bool { return false })},
		{Authorize: outboxadmin.AllowAll(), ReplayBatchSize: 1, TrustedOrigins: []string{"https://ops.example:8443"}},
	} {
		opts.Logger = quiet
		if _, err := outboxadmin.New(dead, opts); err != nil {
			t.Errorf("New(%+v) = %v", opts, err)
		}
	}
}

// deadEventsOver returns the dead-event manager of a writer-only outbox over store.
func deadEventsOver(t testing.TB, store outbox.Store) *outbox.DeadEvents {
	t.Helper()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ob.Dead()
}
