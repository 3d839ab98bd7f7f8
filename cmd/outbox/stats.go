package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// statuses are the statuses stats prints, in order.
var statuses = []outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusWaiting, outbox.StatusDead,
	outbox.StatusDone, outbox.StatusFallback, outbox.StatusDiscarded}

// typeCount is a count of stats -json's by_type.
type typeCount struct {
	Status    string `json:"status"`
	EventType string `json:"event_type"`
	Count     int64  `json:"count"`
}

func (c *cli) stats(ctx context.Context) error {
	dead, err := c.dead()
	if err != nil {
		return err
	}
	st, err := dead.Stats(ctx)
	if err != nil {
		return err
	}
	byType, err := dead.CountByType(ctx)
	if err != nil {
		return err
	}
	// In the order of the status table, then by event type.
	slices.SortFunc(byType, func(a, b outbox.TypeCount) int {
		return cmp.Or(cmp.Compare(slices.Index(statuses, a.Status), slices.Index(statuses, b.Status)),
			cmp.Compare(a.EventType, b.EventType))
	})
	if c.json {
		counts := map[string]int64{}
		for _, s := range statuses {
			counts[s.String()] = st.Counts[s]
		}
		types := []typeCount{}
		for _, tc := range byType {
			types = append(types, typeCount{Status: tc.Status.String(), EventType: tc.EventType, Count: tc.Count})
		}
		body := map[string]any{"counts": counts, "by_type": types, "blocked_keys": st.BlockedKeys}
		if !st.OldestPending.IsZero() {
			body["oldest_pending_at"] = st.OldestPending
		}
		if !st.OldestBlocked.IsZero() {
			body["oldest_blocked_at"] = st.OldestBlocked
		}
		return c.writeJSON(body)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STATUS\tEVENTS")
	for _, s := range statuses {
		fmt.Fprintf(w, "%s\t%d\n", s, st.Counts[s])
	}
	fmt.Fprintf(w, "\noldest pending\t%s\nblocked keys\t%d\noldest blocked\t%s\n",
		since(st.OldestPending), st.BlockedKeys, since(st.OldestBlocked))
	if err := w.Flush(); err != nil {
		return err
	}
	if len(byType) == 0 {
		return nil
	}
	w = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nSTATUS\tTYPE\tEVENTS")
	for _, tc := range byType {
		fmt.Fprintf(w, "%s\t%s\t%d\n", tc.Status, cell(tc.EventType, 0), tc.Count)
	}
	return w.Flush()
}

// since formats t and its age, or "-" when it is zero.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return utc(t) + " (" + time.Since(t).Round(time.Second).String() + " ago)"
}
