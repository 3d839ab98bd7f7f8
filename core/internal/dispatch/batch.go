package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// batchCall gathers the attempts of one batch and runs HandleBatch once every member has
// either joined (its interceptors ran and it waits for its result) or left (it will
// not be part of the call: its interceptors failed, its claim was too short, a hard
// stop, or its worker abandoned it before it joined).
type batchCall struct {
	rt      *Route
	runCtx  context.Context
	timeout time.Duration // the subscription's listener timeout; <= 0: none
	mu      sync.Mutex
	state   []slotState
	items   []BatchItem // per slot; set when it joins
	results []chan error
	open    int // members neither joined nor left
	joined  int
}

type slotState uint8

const (
	slotOpen slotState = iota
	slotJoined
	slotLeft
)

// batchSlot is one member's handle on its batch call.
type batchSlot struct {
	call *batchCall
	i    int
}

func newBatchCall(runCtx context.Context, rt *Route, timeout time.Duration, n int) *batchCall {
	b := &batchCall{rt: rt, runCtx: runCtx, timeout: timeout, state: make([]slotState, n),
		items: make([]BatchItem, n), results: make([]chan error, n), open: n}
	for i := range b.results {
		b.results[i] = make(chan error, 1)
	}
	return b
}

// join adds e, with its attempt's context, to the call and waits for its result. A
// member that already left gets an error (the call went ahead without it).
func (s *batchSlot) join(ctx context.Context, e *Event) error {
	b := s.call
	b.mu.Lock()
	if b.state[s.i] != slotOpen {
		b.mu.Unlock()
		return fmt.Errorf("outbox: event %s missed its batch: the batch was handed to the listener without it", e.ID)
	}
	b.state[s.i] = slotJoined
	b.items[s.i] = BatchItem{Ctx: ctx, Event: e}
	b.joined++
	b.open--
	fire := b.open == 0
	b.mu.Unlock()
	if fire {
		go b.run()
	}
	return <-b.results[s.i]
}

// leave takes the member out of the call unless it joined; the last member to settle
// starts the call.
func (s *batchSlot) leave() {
	b := s.call
	b.mu.Lock()
	if b.state[s.i] != slotOpen {
		b.mu.Unlock()
		return
	}
	b.state[s.i] = slotLeft
	b.open--
	fire := b.open == 0 && b.joined > 0
	b.mu.Unlock()
	if fire {
		go b.run()
	}
}

// run calls HandleBatch with the members that joined, in queue order (all have
// settled, so nothing changes any more), and hands each its result.
func (b *batchCall) run() {
	items, slots := make([]BatchItem, 0, b.joined), make([]int, 0, b.joined)
	for i, st := range b.state {
		if st == slotJoined {
			items, slots = append(items, b.items[i]), append(slots, i)
		}
	}
	errs := b.call(items)
	for k, i := range slots {
		b.results[i] <- errs[k]
	}
}

// call runs HandleBatch under the subscription's timeout and returns one error per
// item: every item gets the same error when HandleBatch panics or returns a slice of
// another length, or when a hard stop came first (no listener starts after one).
func (b *batchCall) call(items []BatchItem) (errs []error) {
	n := len(items)
	fail := func(err error) []error {
		errs := make([]error, n)
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if err := b.runCtx.Err(); err != nil {
		return fail(err)
	}
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if b.timeout > 0 {
		ctx, cancel = context.WithTimeout(b.runCtx, b.timeout)
	} else {
		ctx, cancel = context.WithCancel(b.runCtx)
	}
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			errs = fail(newPanicError(r))
		}
	}()
	errs = b.rt.HandleBatch(ctx, items)
	if len(errs) != n {
		return fail(fmt.Errorf("outbox: listener %s: HandleBatch returned %d results for %d events", b.rt.Name, len(errs), n))
	}
	return errs
}
