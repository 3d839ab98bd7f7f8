package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// invokeDelivery runs the interceptors around call and returns the attempt's error.
// Panics in Before and call become *PanicError; panics and errors in After are logged.
func invokeDelivery(ctx context.Context, log *slog.Logger, chain []Interceptor, e *Event,
	call func(context.Context, *Event) error,
) error {
	ctxs := make([]context.Context, 0, len(chain))
	var err error
	cur := ctx
	for _, ic := range chain {
		var next context.Context
		next, err = protectBefore(ic, cur, e)
		if err != nil {
			break
		}
		if next != nil {
			cur = next
		}
		ctxs = append(ctxs, cur)
	}
	if err == nil {
		err = protectCall(call, cur, e)
	}
	for i := len(ctxs) - 1; i >= 0; i-- {
		if aerr := protectAfter(chain[i], ctxs[i], e, err); aerr != nil {
			attrs := []slog.Attr{
				slog.String("event_id", e.ID),
				slog.Int("interceptor", i),
				slog.String("error", aerr.Error()),
			}
			if pe, ok := aerr.(*PanicError); ok {
				attrs = append(attrs, slog.String("stack", string(pe.Stack)))
			}
			log.LogAttrs(ctx, slog.LevelWarn, "interceptor After failed; ignored", attrs...)
		}
	}
	return err
}

func newPanicError(r any) *PanicError {
	return &PanicError{Value: r, Stack: debug.Stack()}
}

func protectBefore(ic Interceptor, ctx context.Context, e *Event) (next context.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			next, err = nil, newPanicError(r)
		}
	}()
	next, err = ic.Before(ctx, e)
	if err != nil {
		err = fmt.Errorf("interceptor before: %w", err)
	}
	return next, err
}

func protectAfter(ic Interceptor, ctx context.Context, e *Event, derr error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	return ic.After(ctx, e, derr)
}

func protectCall(call func(context.Context, *Event) error, ctx context.Context, e *Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	return call(ctx, e)
}
