package outbox_test

import (
	"context"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
)

func TestTxFromContext(t *testing.T) {
	t.Parallel()
	if _, ok := outbox.TxFromContext(context.Background()); ok {
		t.Fatal("empty context has a tx")
	}
	var tx hookedTx
	got, ok := outbox.TxFromContext(outbox.ContextWithTx(context.Background(), &tx))
	if !ok || got != &tx {
		t.Fatalf("got %v %v", got, ok)
	}
}

func TestJoinCarriesCallbacks(t *testing.T) {
	t.Parallel()
	var cb adapterkit.Callbacks
	rec := &insertRecorder{}
	h := &stageHook{}
	w := newWriter(t, rec, outbox.WriterConfig{Hooks: []outbox.WriterHook{h}})
	exec := adapterkit.Join(fakeTx{}, &cb)
	if _, err := w.Write(context.Background(), exec, outbox.Envelope{Type: "T", Payload: 1}); err != nil {
		t.Fatal(err)
	}
	cb.Committed()
	if got := h.log(); got != "before,afterWrite,afterCommit" {
		t.Fatalf("got %s", got)
	}
}
