package outboxadmin

import (
	_ "embed" // the page and its assets are compiled into the binary
	"net/http"
)

// The page: plain HTML, JavaScript and CSS with no build step and no external resource.
var (
	//go:embed static/index.html
	indexHTML string
	//go:embed static/app.js
	appJS string
	//go:embed static/app.css
	appCSS string
)

// pageCSP allows the page's own script, style and API calls and nothing else: no inline
// script or style, no other origin, no framing.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func servePage(w http.ResponseWriter, _ *http.Request) {
	serveStatic(w, "text/html; charset=utf-8", indexHTML)
}

func serveScript(w http.ResponseWriter, _ *http.Request) {
	serveStatic(w, "text/javascript; charset=utf-8", appJS)
}

func serveStyle(w http.ResponseWriter, _ *http.Request) {
	serveStatic(w, "text/css; charset=utf-8", appCSS)
}

func serveStatic(w http.ResponseWriter, contentType, body string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	_, _ = w.Write([]byte(body))
}
