package main

import (
	"slices"
	"testing"
)

func TestRedactDSN(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dsn, want string
		secrets   []string
	}{
		{"postgres://app:s3cret@db:5432/app?sslmode=require", "postgres://app:xxxxx@db:5432/app?sslmode=require", []string{"s3cret"}},
		{"postgresql://app:p%40ss%2Fw@db/app", "postgresql://app:xxxxx@db/app", []string{"p%40ss%2Fw", "p@ss/w"}},
		{"postgres://app:p@ss/w@db/app", "postgres://app:xxxxx@db/app", []string{"p@ss/w"}},
		{"postgres://app@db/app?sslmode=disable&password=s3cret&x=1", "postgres://app@db/app?sslmode=disable&password=xxxxx&x=1", []string{"s3cret"}},
		{"postgres://app:pw1@db/app?sslpassword=key2", "postgres://app:xxxxx@db/app?sslpassword=xxxxx", []string{"pw1", "key2"}},
		{"postgres://app@db/app", "postgres://app@db/app", nil},
		{"postgres://app:@db/app", "postgres://app:@db/app", nil},
		{"postgres://db/app?sslmode=disable", "postgres://db/app?sslmode=disable", nil},
		{"host=db user=app password=s3cret dbname=app", "host=db user=app password=xxxxx dbname=app", []string{"s3cret"}},
		{"host=db password = 'se cr\\'et' dbname=app", "host=db password = 'xxxxx' dbname=app", []string{`se cr\'et`, "se cr'et", `se cr\\'et`}},
		{"user=app PASSWORD='unterminated s3cret", "user=app PASSWORD='xxxxx'", []string{"unterminated s3cret"}},
		{"host=/var/run/postgresql dbname=app", "host=/var/run/postgresql dbname=app", nil},
		{"app:s3cret@tcp(db:3306)/app?parseTime=true&loc=UTC", "app:xxxxx@tcp(db:3306)/app?parseTime=true&loc=UTC", []string{"s3cret"}},
		{"app:s3:cr@et/x@tcp(db)/app", "app:xxxxx@tcp(db)/app", []string{"s3:cr@et/x"}},
		{"app:s3cret@/app", "app:xxxxx@/app", []string{"s3cret"}},
		{"app@unix(/tmp/mysql.sock)/app?allowCleartextPasswords=true", "app@unix(/tmp/mysql.sock)/app?allowCleartextPasswords=true", nil},
		{"/var/lib/app/outbox.db", "/var/lib/app/outbox.db", nil},
		{"file:/var/lib/app/outbox.db?mode=ro&_pragma=busy_timeout(5000)", "file:/var/lib/app/outbox.db?mode=ro&_pragma=busy_timeout(5000)", nil},
		{"outbox.db", "outbox.db", nil},
	} {
		shown, secrets := redactSecrets(c.dsn)
		missing := len(secrets) > 0 != (len(c.secrets) > 0)
		for _, s := range c.secrets {
			missing = missing || !slices.Contains(secrets, s)
		}
		if shown != c.want || missing {
			t.Errorf("redactSecrets(%q) = %q, %q; want %q and the secrets %q", c.dsn, shown, secrets, c.want, c.secrets)
		}
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		msg     string
		secrets []string
		want    string
	}{
		{"dial: user app password s3cret", []string{"s3cret"}, "dial: user app password xxxxx"},
		{`unknown command "postgres://app:pw@db/app"`, nil, `unknown command "postgres://app:xxxxx@db/app"`},
		{`invalid value "app:pw@tcp(db)/app" for flag -timeout`, nil, `invalid value "app:xxxxx@tcp(db)/app" for flag -timeout`},
		{"cannot parse `host=db password=pw`: bad", nil, "cannot parse `host=db password=xxxxx`: bad"},
		// Secrets shorter than minScrubbed are left to the DSN's redaction.
		{"replaying 2 DEAD events (event_type=A listener=mail)", []string{"ab"}, "replaying 2 DEAD events (event_type=A listener=mail)"},
		{"cli:me@host x/y", nil, "cli:me@host x/y"},
	} {
		if got := scrub(c.msg, c.secrets); got != c.want {
			t.Errorf("scrub(%q, %q) = %q, want %q", c.msg, c.secrets, got, c.want)
		}
	}
}
