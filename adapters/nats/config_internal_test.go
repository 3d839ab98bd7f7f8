package outboxnats

import (
	"errors"
	"testing"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
)

func TestCheckSubject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		subject string
		ok      bool
	}{
		{"outbox.Order.OrderPlaced", true},
		{"orders", true},
		{"a*b.c>d", true}, // '*' and '>' are wildcards only as whole tokens
		{"$KV.x", true},
		{"Zähler.Größe", true},
		{"", false},
		{".a", false},
		{"a.", false},
		{"a..b", false},
		{"a.*", false},
		{"a.>", false},
		{">", false},
		{"a b", false},
		{"a\tb", false},
		{"a\r\nb", false},
		{"a\x00b", false},
		{"a\x7fb", false},
		{"a\u00a0b", false}, // no-break space
		{"\xff", false},
	}
	for _, tt := range tests {
		err := checkSubject(tt.subject)
		if (err == nil) != tt.ok {
			t.Errorf("checkSubject(%q) = %v, want ok=%v", tt.subject, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("checkSubject(%q) = %v, want ErrInvalidSubject", tt.subject, err)
		}
	}
}

func TestCheckHeaderKey(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"traceparent", "Nats-Msg-Id", "outbox-event-id", "x_y.z~!#$%&'*+^`|"} {
		if err := checkHeaderKey(key); err != nil {
			t.Errorf("checkHeaderKey(%q) = %v, want nil", key, err)
		}
	}
	for _, key := range []string{"", "a b", "a:b", "a/b", "ä", "a\nb", `a"b`, "a=b", "{x}"} {
		if err := checkHeaderKey(key); !errors.Is(err, ErrInvalidHeader) {
			t.Errorf("checkHeaderKey(%q) = %v, want ErrInvalidHeader", key, err)
		}
	}
}

// FuzzDefaultSubject checks that every event the outbox can store gets a valid
// default subject of exactly three tokens.
func FuzzDefaultSubject(f *testing.F) {
	f.Add("Order", "OrderPlaced")
	f.Add("", "x")
	f.Add("a.b.*", "> c\t")
	f.Add("\u2028", "\x01")
	f.Fuzz(func(t *testing.T, aggregateType, eventType string) {
		if eventType == "" || !utf8.ValidString(aggregateType) || !utf8.ValidString(eventType) {
			t.Skip("the outbox rejects such an envelope")
		}
		subject := DefaultSubject(&outbox.Event{AggregateType: aggregateType, Type: eventType})
		if err := checkSubject(subject); err != nil {
			t.Fatalf("DefaultSubject(%q, %q) = %q: %v", aggregateType, eventType, subject, err)
		}
	})
}
