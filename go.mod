module github.com/outboxkit/outbox

go 1.25.0
