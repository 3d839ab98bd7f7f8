package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
)

// pauseResult is the JSON of pause and resume.
type pauseResult struct {
	Action   string `json:"action"`           // "pause" or "resume"
	Listener string `json:"listener"`         // the subscription
	Reason   string `json:"reason,omitempty"` // pause
	Error    string `json:"error,omitempty"`
}

// pausedEntry is a subscription of paused -json.
type pausedEntry struct {
	Listener string    `json:"listener"`
	At       time.Time `json:"at"`
	Actor    string    `json:"actor"`
	Reason   string    `json:"reason"`
}

// setPaused pauses (cmd "pause") or resumes (cmd "resume") the subscription args name,
// on every process of the table, with the actor of ctx.
func (c *cli) setPaused(ctx context.Context, cmd string, args []string) error {
	synopsis := "resume SUBSCRIPTION"
	if cmd == "pause" {
		synopsis = "pause SUBSCRIPTION [-reason TEXT]"
	}
	fs := c.flags(cmd, synopsis)
	var reason string
	if cmd == "pause" {
		fs.StringVar(&reason, "reason", "", "why, recorded with the pause and shown by outbox paused and the admin page")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	// The flags may follow the name too: "pause Order/OrderPlaced -reason ...".
	var name string
	if fs.NArg() > 0 {
		name = fs.Arg(0)
		if err := parse(fs, fs.Args()[1:]); err != nil {
			return err
		}
	}
	switch {
	case name == "":
		return usagef("%s takes the name of one subscription", cmd)
	case fs.NArg() > 0:
		return usagef("%s takes one subscription, not %d", cmd, fs.NArg()+1)
	case len(name) > outbox.MaxListenerLen || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return usagef("%s: subscription %q is longer than %d bytes or not UTF-8 text", cmd, name, outbox.MaxListenerLen)
	case len(reason) > outbox.MaxLastErrorLen || !utf8.ValidString(reason) || strings.IndexByte(reason, 0) >= 0:
		return usagef("pause: -reason is longer than %d bytes or not UTF-8 text", outbox.MaxLastErrorLen)
	}
	events, err := c.dead()
	if err != nil {
		return err
	}
	if err := c.requireLatest(ctx, cmd); err != nil {
		return err
	}
	res := pauseResult{Action: cmd, Listener: name, Reason: reason}
	past := "resumed"
	if cmd == "pause" {
		past = "paused"
		err = events.Pause(ctx, name, reason)
	} else {
		err = events.Resume(ctx, name)
	}
	if err != nil {
		res.Error = c.message(err)
	}
	if c.json {
		if jerr := c.writeJSON(res); jerr != nil {
			return jerr
		}
	} else if err == nil {
		fmt.Fprintf(c.out, "%s %s\n", past, text(name))
	}
	return asUsage(err)
}

// paused lists the paused subscriptions of the table, by name.
func (c *cli) paused(ctx context.Context, args []string) error {
	fs := c.flags("paused", "paused")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("paused takes no arguments")
	}
	events, err := c.dead()
	if err != nil {
		return err
	}
	if err := c.requireLatest(ctx, "paused"); err != nil {
		return err
	}
	list, err := events.Paused(ctx)
	if err != nil {
		return asUsage(err)
	}
	if c.json {
		entries := []pausedEntry{}
		for _, p := range list {
			entries = append(entries, pausedEntry{Listener: p.Listener, At: p.At.UTC(), Actor: p.Actor, Reason: p.Reason})
		}
		return c.writeJSON(map[string]any{"paused": entries})
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SUBSCRIPTION\tSINCE\tACTOR\tREASON")
	for _, p := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", cell(p.Listener, 0), since(p.At), cell(p.Actor, 60), orDash(cell(p.Reason, 80)))
	}
	return w.Flush()
}
