package main

import "testing"

func TestMinimalSQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, got, want string
	}{
		{"insert, PostgreSQL, 2 rows", minInsertSQL("postgres", `"s"."t"`, 2),
			`INSERT INTO "s"."t" (id, payload, status, created_at) VALUES ($1, $2, 0, $3), ($4, $5, 0, $6)`},
		{"insert, MySQL, 1 row", minInsertSQL("mysql", "`s`.`t`", 1),
			"INSERT INTO `s`.`t` (id, payload, status, created_at) VALUES (?, ?, 0, ?)"},
		{"insert, SQLite, 2 rows", minInsertSQL("sqlite", `"t"`, 2),
			`INSERT INTO "t" (id, payload, status, created_at) VALUES (?, ?, 0, ?), (?, ?, 0, ?)`},
		{"read NEW rows", minSelectSQL(`"t"`, 100),
			`SELECT id, payload FROM "t" WHERE status = 0 ORDER BY created_at LIMIT 100`},
		{"mark DONE, PostgreSQL", minDoneSQL("postgres", `"t"`, 3), `UPDATE "t" SET status = 1 WHERE id IN ($1, $2, $3)`},
		{"mark DONE, MySQL", minDoneSQL("mysql", "`t`", 2), "UPDATE `t` SET status = 1 WHERE id IN (?, ?)"},
		{"table, PostgreSQL", minTableDDL("postgres", `"t"`),
			`CREATE TABLE "t" (id TEXT NOT NULL PRIMARY KEY, payload JSONB NOT NULL, status SMALLINT NOT NULL, created_at TIMESTAMPTZ NOT NULL)`},
		{"table, MySQL", minTableDDL("mysql", "`t`"),
			"CREATE TABLE `t` (id VARCHAR(64) NOT NULL PRIMARY KEY, payload JSON NOT NULL, status SMALLINT NOT NULL, created_at DATETIME(6) NOT NULL)"},
		{"table, SQLite", minTableDDL("sqlite", `"t"`),
			`CREATE TABLE "t" (id TEXT NOT NULL PRIMARY KEY, payload TEXT NOT NULL, status SMALLINT NOT NULL, created_at TEXT NOT NULL)`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
	}
}
