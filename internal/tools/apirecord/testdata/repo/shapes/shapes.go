// Package shapes is apirecord's line-format fixture: one of each kind of feature.
package shapes

import (
	"context"
	"database/sql"
	"io"
	"time"
)

// Kind is a typed constant's type.
type Kind int

// Kinds, with iota.
const (
	Circle Kind = iota + 1
	Square
)

const (
	Name    = "shapes"
	Big     = 1 << 40
	Ratio   = 1.5
	Enabled = true
	Letter  = 'x'
	Timeout = 3 * time.Second
	private = 1
)

// Vars.
var (
	ErrNoShape = io.EOF
	Registry   map[string][]*Shape
	Updates    <-chan Kind
	Sink       chan<- error
	Pairs      [2]struct{ A, B int }
	hidden     int
)

// Shape has fields of every sort.
type Shape struct {
	Base
	*Meta
	Kind    Kind   `json:"kind"`
	Label   string `json:"label,omitempty"`
	OnDraw  func(context.Context, ...string) (int, error)
	Options map[string]any
	secret  int
}

// Base is embedded in Shape: its methods are promoted.
type Base struct{ ID string }

// Describe is promoted to Shape and *Shape.
func (Base) Describe() string { return "" }

// Meta is embedded by pointer.
type Meta struct{}

// Touch has a pointer receiver; through *Meta it is in Shape's value method set.
func (*Meta) Touch(time.Time) {}

// Area has a value receiver.
func (s Shape) Area() float64 { return 0 }

// Scale has a pointer receiver.
func (s *Shape) Scale(float64) error { return nil }

func (s *Shape) private() {}

// Drawer is an interface with an embedded interface.
type Drawer interface {
	io.Closer
	Draw(ctx context.Context, db *sql.DB, s *Shape) (n int, err error)
}

// Sealed has an unexported method.
type Sealed interface {
	Public()
	seal()
}

// Number is a constraint.
type Number interface {
	~int | ~int64 | float64
}

// Stack is generic.
type Stack[T comparable, N Number] struct {
	Items []T
	Sizes map[T]N
}

// Push has a generic receiver.
func (s *Stack[E, M]) Push(E) M { var m M; return m }

// Sum is a generic function.
func Sum[T Number](xs ...T) T { var t T; return t }

// Map is a generic function with two type parameters.
func Map[In, Out any](in []In, f func(In) Out) []Out { return nil }

// DrawFunc is a function type with a method.
type DrawFunc func(*Shape) error

// Draw calls f.
func (f DrawFunc) Draw(s *Shape) error { return f(s) }

// Alias is a type alias.
type Alias = Shape

// Pair is a generic alias.
type Pair[T comparable] = Stack[T, int]

// UseAlias has an alias in its signature.
func UseAlias(Alias, Pair[string]) {}

// New has no parameters and one result.
func New() *Shape { return nil }

// Nothing has neither.
func Nothing() {}

type unexported struct{ Exported int }

// Leak returns an unexported type.
func Leak() unexported { return unexported{} }

func helper() {}
