package chaos

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
)

func TestRecorder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	log, err := CreateLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	r := Recorder{Log: log, Node: "n1"}
	ok := r.Listener()
	boom := errors.New("boom")
	failing := r.Wrap(outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return boom }))
	panicking := r.Wrap(outbox.ListenerFunc(func(context.Context, *outbox.Event) error { panic("oops") }))

	if err := ok.Handle(t.Context(), &outbox.Event{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := failing.Handle(t.Context(), &outbox.Event{ID: "b"}); !errors.Is(err, boom) {
		t.Fatalf("failing listener: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not propagate")
			}
		}()
		_ = panicking.Handle(t.Context(), &outbox.Event{ID: "c"})
	}()
	recs, err := ReadLogs(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range recs {
		if rec.Node != "n1" {
			t.Errorf("record %+v: node %q", rec, rec.Node)
		}
		got = append(got, rec.Event+":"+string(rec.Kind))
	}
	want := []string{"a:started", "a:delivered", "b:started", "b:failed", "c:started", "c:failed"}
	if !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}
