module github.com/outboxkit/outbox

go 1.25.0

require go.uber.org/goleak v1.3.0
