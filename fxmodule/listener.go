package outboxfx

import (
	"fmt"
	"reflect"
	"runtime"

	"go.uber.org/fx"

	outbox "github.com/outboxkit/outbox/core"
)

// Listener routes the events of one (aggregate type, event type) to an
// [outbox.Listener], with the listener's own name and delivery policy when set
// (see [outbox.Subscription]). Listener constructors return it and are provided with
// [AsListener]; [Module] subscribes every Listener of the fx value group
// "outbox_listeners".
type Listener = outbox.Subscription

var (
	typeOfListener  = reflect.TypeFor[Listener]()
	typeOfListeners = reflect.TypeFor[[]Listener]()
	typeOfError     = reflect.TypeFor[error]()
)

// AsListener annotates a listener constructor for fx.Provide so that fx adds what it
// returns to the listeners [Module] registers:
//
//	fx.Provide(outboxfx.AsListener(NewOrderPlacedListener))
//
// constructor is a function, with any parameters fx can fill, that returns a
// [Listener] or a []Listener (a type that handles several routes), optionally followed
// by an error. Anything else makes fx.New fail with an error that names the
// constructor and what it returns; constructor is checked when AsListener is called,
// so such a mistake is never silently dropped.
func AsListener(constructor any) any {
	group, err := listenerGroup(constructor)
	if err != nil {
		// A member of the group that fails when fx builds the group: the app then fails
		// to start with this error, as it does for any failing constructor.
		return fx.Annotated{Group: listenerGroupName, Target: func() (Listener, error) { return Listener{}, err }}
	}
	// fx.Annotated rather than fx.Annotate: fx.Annotate hands fx a reflect.MakeFunc
	// wrapper, so fx's errors about the constructor (a missing dependency, a returned
	// error) would name "reflect".makeFuncStub instead of the user's function.
	return fx.Annotated{Group: group, Target: constructor}
}

// listenerGroupName is the fx value group of the listeners [Module] registers.
const listenerGroupName = "outbox_listeners"

// listenerGroup returns the fx group for the results of constructor, or why it is not
// a listener constructor.
func listenerGroup(constructor any) (string, error) {
	ft := reflect.TypeOf(constructor)
	if ft == nil || ft.Kind() != reflect.Func {
		return "", fmt.Errorf("outboxfx: AsListener: want a constructor function returning outboxfx.Listener, got %T", constructor)
	}
	if reflect.ValueOf(constructor).IsNil() {
		return "", fmt.Errorf("outboxfx: AsListener: the constructor is a nil %v", ft)
	}
	name := funcName(constructor)
	n := ft.NumOut()
	if n == 0 || n > 2 || (n == 2 && ft.Out(1) != typeOfError) {
		return "", fmt.Errorf("outboxfx: AsListener(%s): the constructor must return outboxfx.Listener or []outboxfx.Listener, "+
			"optionally followed by an error; its type is %v", name, ft)
	}
	switch ft.Out(0) {
	case typeOfListener:
		return listenerGroupName, nil
	case typeOfListeners:
		return listenerGroupName + ",flatten", nil
	}
	return "", fmt.Errorf("outboxfx: AsListener(%s): the constructor must return outboxfx.Listener or []outboxfx.Listener, "+
		"not %v; wrap the listener: outboxfx.Listener{AggregateType: ..., EventType: ..., Listener: l}", name, ft.Out(0))
}

// funcName returns the name of the function fn, for error messages.
func funcName(fn any) string {
	if f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()); f != nil {
		return f.Name()
	}
	return fmt.Sprintf("%T", fn)
}
