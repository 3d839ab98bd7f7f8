package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtype"
)

func (c *cli) events(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("events: want list or show")
	}
	switch args[0] {
	case "list":
		return c.list(ctx, args[1:])
	case "show":
		if len(args) != 2 || args[1] == "" {
			return usagef("events show takes one event ID")
		}
		return c.show(ctx, args[1])
	default:
		return usagef("events: unknown subcommand %q (want list or show)", args[0])
	}
}

// statusNames are the values of -status.
var statusNames = map[string]outbox.Status{
	"new": outbox.StatusNew, "retry": outbox.StatusRetry, "waiting": outbox.StatusWaiting, "dead": outbox.StatusDead,
	"done": outbox.StatusDone, "fallback": outbox.StatusFallback, "discarded": outbox.StatusDiscarded,
}

// statusFlag is -status: a status by name, in any case.
type statusFlag struct{ s *outbox.Status }

func (f statusFlag) String() string {
	if f.s == nil {
		return ""
	}
	return strings.ToLower(f.s.String())
}

func (f statusFlag) Set(v string) error {
	s, ok := statusNames[strings.ToLower(v)]
	if !ok {
		return errors.New("want new, retry, waiting, dead, done, fallback or discarded")
	}
	*f.s = s
	return nil
}

// timeFlag is -from or -to: an RFC 3339 time.
type timeFlag struct{ t *time.Time }

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.UTC().Format(time.RFC3339Nano)
}

func (f timeFlag) Set(v string) error {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return errors.New("want an RFC 3339 time such as 2006-01-02T15:04:05Z")
	}
	if !storable(t) {
		return fmt.Errorf("want a time in the years %d to %d", minYear, maxYear)
	}
	*f.t = t.UTC()
	return nil
}

// The years every dialect stores (MySQL's DATETIME range), as the admin API's cursors.
const (
	minYear = 1000
	maxYear = 9999
)

// storable reports whether every database can compare t with its times.
func storable(t time.Time) bool {
	y := t.UTC().Year()
	return y >= minYear && y <= maxYear
}

func (c *cli) list(ctx context.Context, args []string) error {
	fs := c.flags("events list", "events list [-status S] [-type T] [-aggregate A] [-aggregate-id ID] [-listener L] [-order-key K] [-blocking] [-error TEXT] [-from TIME] [-to TIME] [-newest] [-limit N] [-after CURSOR]")
	q := outbox.EventQuery{Status: outbox.StatusDead}
	fs.Var(statusFlag{&q.Status}, "status", "list the events of `status`: new, retry, waiting, dead, done, fallback or discarded")
	fs.StringVar(&q.EventType, "type", "", "only events of this type")
	fs.StringVar(&q.AggregateType, "aggregate", "", "only events of this aggregate type")
	fs.StringVar(&q.AggregateID, "aggregate-id", "", "only the events of this aggregate ID")
	fs.StringVar(&q.Listener, "listener", "", "only events of this listener (a fan-out delivery's subscription, or the listener that failed for good)")
	fs.StringVar(&q.ErrorContains, "error", "", "only events whose last error contains this text, in any case")
	fs.BoolVar(&q.Blocking, "blocking", false, "only the retry or dead events that hold their order key (waiting events of the key wait behind them)")
	fs.StringVar(&q.OrderKey, "order-key", "", "only the events of this order key, in the key's order (new, retry, waiting and dead events; not with -aggregate-id, -from or -to)")
	fs.Var(timeFlag{&q.From}, "from", "only events at or after this RFC 3339 `time` (created, or finished for done, fallback and discarded)")
	fs.Var(timeFlag{&q.To}, "to", "only events before this RFC 3339 `time`")
	fs.BoolVar(&q.Newest, "newest", false, "newest first (default oldest first)")
	fs.IntVar(&q.Limit, "limit", outbox.DefaultPageSize, fmt.Sprintf("events per page (at most %d)", outbox.MaxPageSize))
	after := fs.String("after", "", "continue after the `cursor` a previous page printed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("events list takes flags only")
	}
	if q.Limit < 1 || q.Limit > outbox.MaxPageSize {
		return usagef("events list: -limit must be between 1 and %d", outbox.MaxPageSize)
	}
	if *after != "" {
		cur, err := decodeCursor(*after)
		if err != nil {
			return usagef("events list: -after %q is not a cursor a previous page printed", *after)
		}
		q.After = cur
	}
	dead, err := c.dead()
	if err != nil {
		return err
	}
	page, err := dead.List(ctx, q)
	if err != nil {
		return asUsage(err)
	}
	next := ""
	if !page.Next.IsZero() {
		next = encodeCursor(page.Next)
	}
	if c.json {
		events := page.Events
		if events == nil {
			events = []outbox.Event{}
		}
		return c.writeJSON(map[string]any{"events": events, "next": next, "partial": page.Partial})
	}
	when := "CREATED"
	if finishOrder(q) {
		when = "FINISHED"
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	seq := "" // a list by order key is in the key's order: each row shows its place
	if q.OrderKey != "" {
		seq = "SEQ\t"
	}
	fmt.Fprintf(w, "ID\t%s%s\tTYPE\tAGGREGATE\tLISTENER\tATTEMPTS\tLAST ERROR\n", seq, when)
	for _, e := range page.Events {
		agg := cell(e.AggregateType, 0)
		if e.AggregateID != "" {
			agg += " " + cell(e.AggregateID, 0)
		}
		if q.OrderKey != "" {
			seq = fmt.Sprintf("%d\t", e.OrderSeq)
		}
		fmt.Fprintf(w, "%s\t%s%s\t%s\t%s\t%s\t%d\t%s\n", cell(e.ID, 0), seq, utc(outboxtype.ListTime(e, q.Status, q.EventFilter)),
			cell(e.Type, 0), agg, orDash(cell(e.Listener, 0)), e.Attempts, cell(e.LastError, 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if next == "" {
		return nil
	}
	more := nextCommand("outbox events list", fs, "after", next)
	if page.Partial {
		fmt.Fprintf(c.errOut, "outbox: partial page: %d of %d events found in the %d rows this page may read; the search goes on with: %s\n",
			len(page.Events), q.Limit, outbox.MaxScanRows, more)
	}
	_, err = fmt.Fprintf(c.out, "\nnext page: %s\n", more)
	return err
}

// finishOrder reports whether the list of q is in the order the events finished: the
// list time (outboxtype.ListTime) of a finished event is then its DoneAt.
func finishOrder(q outbox.EventQuery) bool {
	probe := outbox.Event{CreatedAt: time.Unix(1, 0), DoneAt: time.Unix(2, 0)}
	return outboxtype.ListTime(probe, q.Status, q.EventFilter).Equal(probe.DoneAt)
}

// nextCommand returns the command line that continues a list: cmd with the flags set
// on fs and -name value.
func nextCommand(cmd string, fs *flag.FlagSet, name, value string) string {
	var b strings.Builder
	b.WriteString(cmd)
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			return
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			if f.Value.String() == "true" {
				b.WriteString(" -" + f.Name)
			}
			return
		}
		b.WriteString(" -" + f.Name + " " + shellQuote(f.Value.String()))
	})
	b.WriteString(" -" + name + " " + shellQuote(value))
	return b.String()
}

// shellQuote returns s as one word of a POSIX shell: as it is, in single quotes, or,
// when it holds a rune that the terminal must not get as it is, in the $'...' form
// with Go's escapes (\x1b, \n, \u202e), which that form reads back.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@+=") == "" {
		return s
	}
	if !safe(s) {
		q := strconv.Quote(s)
		return "$'" + strings.ReplaceAll(q[1:len(q)-1], "'", `\'`) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (c *cli) show(ctx context.Context, id string) error {
	dead, err := c.dead()
	if err != nil {
		return err
	}
	e, err := dead.Get(ctx, id)
	if err != nil {
		return err
	}
	if c.json {
		return c.writeJSON(e)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s\t%s\n", k, v)
		}
	}
	t := func(v time.Time) string {
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format(time.RFC3339Nano)
	}
	// Every text of the row is shown by text: escaped when it holds a control character.
	row("id", text(e.ID))
	row("status", e.Status.String())
	row("type", text(e.Type))
	agg := text(e.AggregateType)
	if e.AggregateID != "" {
		agg += " " + text(e.AggregateID)
	}
	row("aggregate", agg)
	row("listener", text(e.Listener))
	row("tenant", text(e.TenantID))
	row("attempts", fmt.Sprint(e.Attempts))
	row("last error", text(e.LastError))
	row("created", t(e.CreatedAt))
	row("available", t(e.AvailableAt))
	row("first failed attempt", t(e.FirstAttemptAt))
	row("finished", t(e.DoneAt))
	if e.OrderKey != "" {
		row("order key", fmt.Sprintf("%s (#%d)", text(e.OrderKey), e.OrderSeq))
	}
	row("claimed by", text(e.LockedBy))
	row("claim until", t(e.LockedUntil))
	if len(e.Headers) > 0 {
		h, _ := json.Marshal(e.Headers)
		row("headers", jsonText(h))
	}
	row("payload", jsonText(e.Payload))
	return w.Flush()
}

// encodeCursor returns the -after value that continues after cur: the admin API's
// cursor form, base64url of "<list time RFC 3339>|<event ID>".
// A list by order key has "#<OrderSeq>" where the others have the time.
func encodeCursor(cur outbox.Cursor) string {
	if cur.OrderSeq != 0 {
		return base64.RawURLEncoding.EncodeToString([]byte("#" + strconv.FormatInt(cur.OrderSeq, 10) + "|" + cur.ID))
	}
	return base64.RawURLEncoding.EncodeToString([]byte(cur.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + cur.ID))
}

// decodeCursor reverses encodeCursor.
func decodeCursor(s string) (outbox.Cursor, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return outbox.Cursor{}, err
	}
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok || id == "" {
		return outbox.Cursor{}, errors.New("no event ID")
	}
	if digits, ok := strings.CutPrefix(ts, "#"); ok {
		seq, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || seq <= 0 {
			return outbox.Cursor{}, errors.New("bad order sequence")
		}
		return outbox.Cursor{OrderSeq: seq, ID: id}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return outbox.Cursor{}, err
	}
	if !storable(t) {
		return outbox.Cursor{}, errors.New("time out of range")
	}
	return outbox.Cursor{CreatedAt: t.UTC(), ID: id}, nil
}
