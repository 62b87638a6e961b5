package api

import (
	"net/http"
	"strings"

	"github.com/policyrollout/reconciler/internal/console"
)

// consoleUI serves the web console's assets (internal/console). They are
// immutable data embedded in the binary, so one handler serves every
// Server.
var consoleUI = console.New()

// isConsolePath matches /ui and everything under /ui/.
func isConsolePath(p string) bool { return p == console.Path || strings.HasPrefix(p, console.Prefix) }

// consolePages serves the web console: static assets, no data and no
// dependencies.
type consolePages struct{}

// serveConsole answers a request the guard admitted under /ui/: the
// assets hold no data, so they need no role, but the Host and Origin
// checks ran (DNS rebinding) and every API call the page then makes keeps
// its own role.
func (s *consolePages) serveConsole(w http.ResponseWriter, r *http.Request) {
	consoleUI.ServeHTTP(w, r)
}
