package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
)

// action is what replay, discard or delete does.
type action struct {
	past  string // "replayed"
	wrong string // the state an event must not be in, for a bulk's message
	one   func(context.Context, string) error
	bulk  func(context.Context, []string) (int64, error)
}

// actionOf returns the action of cmd on d.
func actionOf(d *outbox.Events, cmd string) action {
	switch cmd {
	case "replay":
		return action{"replayed", "not DEAD", d.Replay, d.ReplayIDs}
	case "discard":
		return action{"discarded", "DONE, FALLBACK or DISCARDED already", d.Discard, d.DiscardIDs}
	default:
		return action{"deleted", "not DEAD", d.Delete, d.DeleteIDs}
	}
}

// changeResult is the JSON of replay, discard and delete.
type changeResult struct {
	Action    string        `json:"action"`
	Filter    *filterResult `json:"filter,omitempty"` // replay -all
	Requested int64         `json:"requested"`        // the IDs given, or the DEAD events that matched
	Changed   int64         `json:"changed"`
	Error     string        `json:"error,omitempty"`
}

type filterResult struct {
	EventType     string `json:"event_type"`
	AggregateType string `json:"aggregate_type"`
	Listener      string `json:"listener"`
}

// change replays, discards or deletes the events named by args.
func (c *cli) change(ctx context.Context, cmd string, args []string) error {
	synopsis := cmd + " ID..."
	if cmd == "replay" {
		synopsis = "replay ID... | replay -all [-type T] [-aggregate A] [-listener L] [-yes]"
	}
	fs := c.flags(cmd, synopsis)
	var all, yes bool
	var f outbox.DeadFilter
	if cmd == "replay" {
		fs.BoolVar(&all, "all", false, "replay every DEAD event that matches the filters, instead of IDs")
		fs.BoolVar(&yes, "yes", false, "with -all: replay without asking")
		fs.StringVar(&f.EventType, "type", "", "with -all: only events of this type")
		fs.StringVar(&f.AggregateType, "aggregate", "", "with -all: only events of this aggregate type")
		fs.StringVar(&f.Listener, "listener", "", "with -all: only the events of this listener")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if all {
		if fs.NArg() > 0 {
			return usagef("replay -all takes filters, not event IDs")
		}
		return c.replayAll(ctx, f, yes)
	}
	if yes || f != (outbox.DeadFilter{}) {
		return usagef("replay: -yes, -type, -aggregate and -listener go with -all")
	}
	var ids []string
	seen := map[string]bool{}
	for _, id := range fs.Args() {
		if id == "" || len(id) > outbox.MaxIDLen || !utf8.ValidString(id) {
			return usagef("%s: event ID %q is empty, longer than %d bytes or not UTF-8", cmd, id, outbox.MaxIDLen)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return usagef("%s takes one or more event IDs", cmd)
	}
	dead, err := c.dead()
	if err != nil {
		return err
	}
	if err := c.requireLatest(ctx, cmd); err != nil {
		return err
	}
	act := actionOf(dead, cmd)
	res := changeResult{Action: cmd, Requested: int64(len(ids))}
	if len(ids) == 1 {
		// One event: its own call, which says why it was not changed.
		err = act.one(ctx, ids[0])
		if err == nil {
			res.Changed = 1
		}
	} else {
		for chunk := range slices.Chunk(ids, outbox.MaxBulkIDs) {
			n, cerr := act.bulk(ctx, chunk)
			res.Changed += n
			if cerr != nil {
				err = cerr
				break
			}
		}
		if err == nil && res.Changed < res.Requested {
			err = fmt.Errorf("%s: %d of %d events were not %s: not found, or %s", cmd, res.Requested-res.Changed,
				res.Requested, act.past, act.wrong)
		}
	}
	if err != nil {
		res.Error = c.message(err)
	}
	if c.json {
		if jerr := c.writeJSON(res); jerr != nil {
			return jerr
		}
	} else if len(ids) == 1 && res.Changed == 1 {
		fmt.Fprintf(c.out, "%s %s\n", act.past, text(ids[0]))
	} else if len(ids) > 1 {
		fmt.Fprintf(c.out, "%s %d of %d events\n", act.past, res.Changed, res.Requested)
	}
	return asUsage(err)
}

// replayAll replays the DEAD events that match f, once confirmed: by yes, or by a "y"
// typed at the terminal.
func (c *cli) replayAll(ctx context.Context, f outbox.DeadFilter, yes bool) error {
	dead, err := c.dead()
	if err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return usagef("replay -all: %s", c.message(err))
	}
	if err := c.requireLatest(ctx, "replay -all"); err != nil {
		return err
	}
	n, err := dead.CountDead(ctx, f)
	if err != nil {
		return asUsage(err)
	}
	res := changeResult{Action: outbox.AuditReplayAll, Requested: n,
		Filter: &filterResult{EventType: f.EventType, AggregateType: f.AggregateType, Listener: f.Listener}}
	what := fmt.Sprintf("%d DEAD %s (%s)", n, plural(n, "event", "events"), describe(f))
	if n == 0 {
		if c.json {
			return c.writeJSON(res)
		}
		_, err := fmt.Fprintf(c.out, "no DEAD events match (%s): nothing to replay\n", describe(f))
		return err
	}
	if !yes {
		ok, err := c.confirm(fmt.Sprintf("replay %s? [y/N] ", what))
		if err != nil {
			err = &refusedError{fmt.Sprintf("replay -all would replay %s; nothing replayed: pass -yes to confirm (%v)", what, err)}
		} else if !ok {
			err = errors.New("replay -all: not confirmed; nothing replayed")
		}
		if err != nil {
			if c.json {
				res.Error = c.message(err)
				if jerr := c.writeJSON(res); jerr != nil {
					return jerr
				}
			}
			return err
		}
		// The time spent answering does not count against -timeout.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
	} else {
		fmt.Fprintf(c.errOut, "outbox: replaying %s\n", what)
	}
	res.Changed, err = dead.ReplayAll(ctx, f, 0)
	if err != nil {
		res.Error = c.message(err)
	}
	if c.json {
		if jerr := c.writeJSON(res); jerr != nil {
			return jerr
		}
	} else {
		fmt.Fprintf(c.out, "replayed %d of %d DEAD events\n", res.Changed, n)
	}
	return err
}

// Why a change could not be confirmed.
var (
	errNoTerminal = errors.New("standard input is not a terminal")
	errNoAnswer   = errors.New("no answer on standard input")
)

// confirm asks question on standard error and reports whether the answer read from
// standard input is yes. It returns errNoTerminal when standard input is not a
// terminal, and errNoAnswer when it ends before an answer.
func (c *cli) confirm(question string) (bool, error) {
	if !isTerminal(c.in) {
		return false, errNoTerminal
	}
	fmt.Fprint(c.errOut, question)
	line, err := bufio.NewReader(c.in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(c.errOut)
		return false, errNoAnswer
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

// isTerminal reports whether r is a character device such as a terminal. /dev/null is
// one too: it reads as an end of input, which confirm takes as no answer.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// describe names filter f as the audit trail does.
func describe(f outbox.DeadFilter) string {
	var parts []string
	for _, kv := range [...][2]string{{"event_type", f.EventType}, {"aggregate_type", f.AggregateType}, {"listener", f.Listener}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+text(kv[1]))
		}
	}
	if len(parts) == 0 {
		return "all dead events"
	}
	return strings.Join(parts, " ")
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
