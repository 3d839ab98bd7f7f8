// Package crash holds the crash points where the fault tests (internal/chaos) kill a
// process built with the outboxchaos tag; in every other build they are empty.
package crash
