package sqlstore

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// maxIdentLen is the longest identifier accepted for a table or schema name. It matches
// PostgreSQL's 63-byte limit, the tightest of the supported databases.
const maxIdentLen = 63

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// validateTableName reports whether name can be used as the outbox table: an identifier
// matching ^[A-Za-z_][A-Za-z0-9_]{0,62}$, optionally qualified by a schema that matches
// the same pattern ("schema.table"). Names are always quoted in SQL, so reserved words
// and mixed case are allowed and kept as written. It returns a *[ConfigError] with Field
// "Table" when the name is not valid.
func validateTableName(name string) error {
	_, err := parseTableName(name)
	return err
}

// tableName is a validated, optionally schema-qualified table name.
type tableName struct {
	schema string // empty when unqualified
	name   string
}

// parseTableName validates name and splits it into schema and table.
func parseTableName(name string) (tableName, error) {
	bad := func(reason string) (tableName, error) {
		return tableName{}, &outboxtype.ConfigError{Field: "Table", Reason: fmt.Sprintf("%q: %s", name, reason)}
	}
	if name == "" {
		return bad("empty")
	}
	schema, table, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, table = "", name
	}
	if qualified && !identRE.MatchString(schema) {
		return bad("schema must match " + identRE.String())
	}
	if !identRE.MatchString(table) {
		return bad("table must match " + identRE.String() + ", optionally as schema.table")
	}
	return tableName{schema: schema, name: table}, nil
}

// String returns the unquoted name as the user wrote it.
func (t tableName) String() string {
	if t.schema == "" {
		return t.name
	}
	return t.schema + "." + t.name
}

// indexName derives the name of one of the table's indexes from the table name and a
// suffix such as "_pending_idx". When the result would exceed the identifier limit, the
// table part is shortened and a hash of the full table name is added, so distinct
// tables never end up with the same (silently truncated) index names.
func (t tableName) indexName(suffix string) string {
	if len(t.name)+len(suffix) <= maxIdentLen {
		return t.name + suffix
	}
	h := fnv.New32a()
	h.Write([]byte(t.name))
	tag := fmt.Sprintf("_%08x", h.Sum32())
	return t.name[:maxIdentLen-len(suffix)-len(tag)] + tag + suffix
}
