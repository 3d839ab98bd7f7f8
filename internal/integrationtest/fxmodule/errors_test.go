package outboxfx_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"go.uber.org/fx"

	outbox "github.com/outboxkit/outbox/core"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// TestAppFailsWithClearError checks that each wiring mistake makes fx.New fail, and the
// app's Start with it, with an error that names the problem.
func TestAppFailsWithClearError(t *testing.T) {
	t.Parallel()
	listener := func(aggregateType, eventType string) func() outboxfx.Listener {
		return func() outboxfx.Listener {
			return outboxfx.Listener{AggregateType: aggregateType, EventType: eventType, Listener: newRecordingListener(false)}
		}
	}
	valid := outboxfx.Config{Dialect: outbox.SQLite, Logger: quietLogger()}
	tests := []struct {
		name string
		// opts are the options besides fx.NopLogger, and besides a Config and a
		// *sql.DB unless noConfig or noDB.
		opts     []fx.Option
		config   *outboxfx.Config // nil: a valid one
		noConfig bool
		noDB     bool
		want     []string
		is       error
	}{
		{
			name: "DuplicateListener",
			opts: []fx.Option{
				fx.Provide(outboxfx.AsListener(listener("Order", "OrderPlaced"))),
				fx.Provide(outboxfx.AsListener(listener("Order", "OrderPlaced"))),
			},
			want: []string{"listener already registered", `aggregate type "Order"`, `event type "OrderPlaced"`},
			is:   outbox.ErrDuplicateListener,
		},
		{
			name: "DuplicateGlobalListener",
			opts: []fx.Option{
				fx.Provide(outboxfx.AsListener(listener("", "Tick"))),
				fx.Provide(outboxfx.AsListener(listener(outbox.GlobalAggregateType, "Tick"))),
			},
			want: []string{"listener already registered", `aggregate type "` + outbox.GlobalAggregateType + `"`, `event type "Tick"`},
			is:   outbox.ErrDuplicateListener,
		},
		{
			name: "MissingDB",
			noDB: true,
			want: []string{"DB", "no *sql.DB in the fx app"},
			is:   outbox.ErrInvalidConfig,
		},
		{
			name: "NilDB",
			noDB: true,
			opts: []fx.Option{fx.Provide(func() *sql.DB { return nil })},
			want: []string{"DB", "no *sql.DB in the fx app, or it is nil"},
			is:   outbox.ErrInvalidConfig,
		},
		{
			name:     "MissingConfig",
			noConfig: true,
			want:     []string{"missing type: outboxfx.Config"},
		},
		{
			name:   "MissingDialect",
			config: &outboxfx.Config{Logger: quietLogger()},
			want:   []string{"invalid config: Dialect"},
			is:     outbox.ErrInvalidConfig,
		},
		{
			name:   "NegativeWorkers",
			config: &outboxfx.Config{Dialect: outbox.SQLite, Workers: -1},
			want:   []string{"invalid config: Workers: must be positive, got -1"},
			is:     outbox.ErrInvalidConfig,
		},
		{
			name:   "MultiNodeWithoutClaimTTL",
			config: &outboxfx.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode},
			want:   []string{"invalid config: ClaimTTL: MultiNode mode requires a positive claim TTL"},
			is:     outbox.ErrInvalidConfig,
		},
		{
			name: "ListenerWithoutEventType",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener(listener("Order", "")))},
			want: []string{"register listener", "event type is empty"},
			is:   outbox.ErrInvalidConfig,
		},
		{
			name: "NilListener",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener(func() outboxfx.Listener {
				return outboxfx.Listener{EventType: "OrderPlaced"}
			}))},
			want: []string{"register listener", "listener for OrderPlaced is nil"},
			is:   outbox.ErrInvalidConfig,
		},
		{
			name: "ListenerConstructorFails",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener(func() (outboxfx.Listener, error) {
				return outboxfx.Listener{}, errors.New("broker unreachable")
			}))},
			want: []string{"broker unreachable"},
		},
		{
			name: "ListenerDependencyMissing",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener(newPublishingListener))},
			want: []string{"fxmodule_test\".newPublishingListener", "missing type: *outboxfx_test.publisher"},
		},
		{
			name: "AsListenerOfNonFunction",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener(outboxfx.Listener{EventType: "OrderPlaced"}))},
			want: []string{"AsListener: want a constructor function returning outboxfx.Listener, got outbox.Subscription"},
		},
		{
			name: "AsListenerOfWrongResult",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener(newRecordingListenerForTest))},
			want: []string{
				"AsListener(github.com/outboxkit/outbox/internal/integrationtest/fxmodule_test.newRecordingListenerForTest)",
				"must return outboxfx.Listener or []outboxfx.Listener, not *outboxfx_test.recordingListener",
			},
		},
		{
			name: "AsListenerOfTwoResults",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener(func() (outboxfx.Listener, outboxfx.Listener) {
				return outboxfx.Listener{}, outboxfx.Listener{}
			}))},
			want: []string{"optionally followed by an error; its type is func() (outbox.Subscription, outbox.Subscription)"},
		},
		{
			name: "AsListenerOfNilFunction",
			opts: []fx.Option{fx.Provide(outboxfx.AsListener((func() outboxfx.Listener)(nil)))},
			want: []string{"AsListener: the constructor is a nil func() outbox.Subscription"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := []fx.Option{fx.NopLogger, outboxfx.Module}
			if !tt.noConfig {
				cfg := valid
				if tt.config != nil {
					cfg = *tt.config
				}
				opts = append(opts, fx.Supply(cfg))
			}
			if !tt.noDB {
				db := backends[0].open(t)
				opts = append(opts, fx.Provide(func() *sql.DB { return db }))
			}
			app := fx.New(append(opts, tt.opts...)...)
			err := app.Err()
			requireErrorContains(t, err, tt.want...)
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(err, %v) = false:\n%v", tt.is, err)
			}
			if startErr := app.Start(context.Background()); startErr == nil || startErr.Error() != err.Error() {
				t.Errorf("Start = %v, want the error of fx.New", startErr)
			}
		})
	}
}

// publisher stands for a dependency of a listener, such as a message broker client.
type publisher struct{ sent []string }

func (p *publisher) Handle(_ context.Context, e *outbox.Event) error {
	p.sent = append(p.sent, e.ID)
	return nil
}

func newPublishingListener(p *publisher) outboxfx.Listener {
	return outboxfx.Listener{AggregateType: "Order", EventType: "OrderPlaced", Listener: p}
}

func newRecordingListenerForTest() *recordingListener { return newRecordingListener(false) }
