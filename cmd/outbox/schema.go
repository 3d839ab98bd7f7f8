package main

import (
	"context"
	"fmt"

	outbox "github.com/outboxkit/outbox/core"
)

func (c *cli) migrate(ctx context.Context, args []string) error {
	fs := c.flags("migrate", "migrate [-status] [-aggregate-index]")
	status := fs.Bool("status", false, "show the schema version without changing anything")
	aggregate := fs.Bool("aggregate-index", false, "also create the opt-in index that lists by aggregate need (docs/databases.md)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("migrate takes no arguments")
	}
	if *status && *aggregate {
		return usagef("-status changes nothing: it cannot be given with -aggregate-index")
	}
	if !*status {
		if err := outbox.MigrateTable(ctx, c.db, c.dialect, c.table); err != nil {
			return asUsage(err)
		}
	}
	if *aggregate {
		if err := outbox.MigrateAggregateIndex(ctx, c.db, c.dialect, c.table); err != nil {
			return asUsage(err)
		}
	}
	have, latest, err := outbox.SchemaVersion(ctx, c.db, c.dialect, c.table)
	if err != nil {
		return asUsage(err)
	}
	if c.json {
		return c.writeJSON(map[string]any{"table": c.table, "version": have, "latest": latest, "up_to_date": have == latest})
	}
	state := "up to date"
	switch {
	case have == 0:
		state = "no table: run outbox migrate"
	case have < latest:
		state = "behind: run outbox migrate"
	}
	_, err = fmt.Fprintf(c.out, "%s: schema version %d of %d (%s)\n", c.table, have, latest, state)
	return err
}

// requireLatest fails unless the table is at the latest schema version: changes and
// the audit trail need its audit table, which the admin migration creates. It is
// checked before anything changes, so that no change is made without its record.
func (c *cli) requireLatest(ctx context.Context, what string) error {
	have, latest, err := outbox.SchemaVersion(ctx, c.db, c.dialect, c.table)
	if err != nil {
		return asUsage(err)
	}
	switch {
	case have == 0:
		return fmt.Errorf("%s: there is no table %s: run outbox migrate", what, c.table)
	case have < latest:
		return fmt.Errorf("%s: table %s is at schema version %d of %d (changes and the audit trail need the latest): run outbox migrate",
			what, c.table, have, latest)
	}
	return nil
}
