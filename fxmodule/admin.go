package outboxfx

import (
	"net/http"

	"go.uber.org/fx"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
)

// AdminHandler is the outbox's admin [http.Handler] (see package
// github.com/outboxkit/outbox/admin), provided by [Module]. It is a type of its own so
// that it never collides with the app's other handlers in the fx graph. Mount it under a
// prefix, for example with outboxgin.Mount or outboxecho.Mount, or with
// http.StripPrefix:
//
//	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", admin))
type AdminHandler struct{ http.Handler }

// AdminParams are the dependencies of [NewAdmin], filled in by fx.
type AdminParams struct {
	fx.In

	// Events is the Outbox's events, which the handler lists and changes.
	Events *outbox.Events
	// Options configures the handler; supply them with fx.Supply(outboxadmin.Options{...}).
	// Without them the handler answers every request with 401 (there is no authorizer).
	Options outboxadmin.Options `optional:"true"`
}

// NewAdmin builds the admin handler with [outboxadmin.New]. [Module] provides it; fx
// builds it only when something in the app depends on [AdminHandler], so an app that
// does not mount the admin pays nothing. It returns outboxadmin.New's error for invalid
// options.
func NewAdmin(p AdminParams) (AdminHandler, error) {
	h, err := outboxadmin.New(p.Events, p.Options)
	if err != nil {
		return AdminHandler{}, err
	}
	return AdminHandler{h}, nil
}
