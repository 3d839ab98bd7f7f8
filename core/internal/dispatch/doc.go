// Package dispatch delivers events to their listeners: the queues that the hot path, the
// poller and the workers share ([Queues]), the hot path that takes committed events
// without a read ([HotPath]), the workers, the DONE recorder, stuck-attempt detection,
// batch listeners, the split of fanned-out events, and, in MultiNode mode, the release
// of claims this node will not use ([Releaser]).
//
// Package outbox builds the parts once, in this order, and hands each the ones it
// works with: NewQueues, NewReleaser (MultiNode), NewHotPath, the orderer (package
// order), then New. The Dispatcher's own comment holds the outcome table and the
// claim rules; docs/ARCHITECTURE.md follows one delivery through the packages.
package dispatch
