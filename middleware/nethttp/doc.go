// Package outboxhttp runs net/http requests in a database transaction: [TxPerRequest]
// is middleware of the shape func(http.Handler) http.Handler (for http.Handler chains
// and chi's Use) that begins an [*outbox.Tx] for each request and commits it before the
// response status is sent when the status is a success (below 400 by default), rolling
// it back otherwise or when the handler panics. If the commit fails, the client gets a
// 500 instead of the handler's response. After the commit, the events written in the
// transaction are handed to the outbox's dispatcher. The packages outboxgin and
// outboxecho adapt it to their routers.
//
// Import path: github.com/outboxkit/outbox/middleware/nethttp (package outboxhttp). It
// imports only the standard library and the core package.
//
//	mux := http.NewServeMux()
//	mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
//		tx, _ := outboxhttp.TxFromRequest(r)
//		if _, err := tx.ExecContext(r.Context(), `INSERT INTO orders ...`, ...); err != nil {
//			http.Error(w, "conflict", http.StatusConflict) // rolls back
//			return
//		}
//		if _, err := ob.Writer().Write(r.Context(), tx, env); err != nil { ... }
//		w.WriteHeader(http.StatusCreated) // commits, then sends 201
//	})
//	srv := &http.Server{Handler: outboxhttp.TxPerRequest(db, outboxhttp.Config{})(mux)}
//
// The transaction is also in the request's context ([outbox.TxFromContext]).
package outboxhttp
