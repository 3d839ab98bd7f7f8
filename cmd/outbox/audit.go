package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// auditEntry is an entry of audit -json.
type auditEntry struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Count  int64     `json:"count"`
}

// audit lists the audit trail, newest first.
func (c *cli) audit(ctx context.Context, args []string) error {
	fs := c.flags("audit", "audit [-limit N] [-before ID]")
	var q outbox.AuditQuery
	fs.IntVar(&q.Limit, "limit", outbox.DefaultPageSize, fmt.Sprintf("entries per page (at most %d)", outbox.MaxPageSize))
	fs.StringVar(&q.Before, "before", "", "list the entries older than entry `ID` (as a previous page printed)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("audit takes flags only")
	}
	if q.Limit < 1 || q.Limit > outbox.MaxPageSize {
		return usagef("audit: -limit must be between 1 and %d", outbox.MaxPageSize)
	}
	dead, err := c.dead()
	if err != nil {
		return err
	}
	if err := c.requireLatest(ctx, "audit"); err != nil {
		return err
	}
	page, err := dead.Audit(ctx, q)
	if err != nil {
		return asUsage(err)
	}
	if c.json {
		entries := []auditEntry{}
		for _, e := range page.Entries {
			entries = append(entries, auditEntry(e))
		}
		return c.writeJSON(map[string]any{"entries": entries, "next": page.Next})
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tACTOR\tACTION\tEVENTS\tTARGET")
	for _, e := range page.Entries {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", utc(e.At), cell(e.Actor, 60), cell(e.Action, 0), e.Count, cell(e.Target, 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		_, err = fmt.Fprintf(c.out, "\nnext page: %s\n", nextCommand("outbox audit", fs, "before", page.Next))
	}
	return err
}
