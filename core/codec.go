package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Codec turns payloads into stored JSON text and back (docs/listeners.md).
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default [Codec]: encoding/json.
type JSONCodec struct{}

// Marshal calls json.Marshal.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal calls json.Unmarshal.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Typed is [TypedCodec] with [JSONCodec].
func Typed[T any](fn func(ctx context.Context, e *Event, payload T) error) Listener {
	return TypedCodec(JSONCodec{}, fn)
}

// TypedCodec returns a listener that decodes each payload into a new T with c (nil:
// JSONCodec) and calls fn; a payload that does not decode is a [*PayloadError].
func TypedCodec[T any](c Codec, fn func(ctx context.Context, e *Event, payload T) error) Listener {
	if c == nil {
		c = JSONCodec{}
	}
	return ListenerFunc(func(ctx context.Context, e *Event) error {
		var v T
		if err := c.Unmarshal(e.Payload, &v); err != nil {
			pe := &PayloadError{EventID: e.ID, GoType: reflect.TypeFor[T]().String(), Err: err}
			if ute := (*json.UnmarshalTypeError)(nil); errors.As(err, &ute) {
				pe.Field = ute.Field
			}
			return pe
		}
		return fn(ctx, e, v)
	})
}

// PayloadError is a payload that failed to decode into GoType; it is permanent.
type PayloadError struct {
	EventID, GoType, Field string
	Err                    error
}

func (e *PayloadError) Error() string {
	field := ""
	if e.Field != "" {
		field = ", field " + e.Field
	}
	return fmt.Sprintf("outbox: payload of event %s does not decode into %s%s: %v", e.EventID, e.GoType, field, e.Err)
}

// Unwrap returns ErrUnrecoverable and the codec's error.
func (e *PayloadError) Unwrap() []error { return []error{ErrUnrecoverable, e.Err} }
