package outbox

var _ Metrics = NopMetrics{}
