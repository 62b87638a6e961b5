package config

// The values of [api] path_escaped_slashes, after Envoy's
// path_with_escaped_slashes_action (REJECT_REQUEST, UNESCAPE_AND_FORWARD,
// KEEP_UNCHANGED); engine.ParseEscapedSlashes reads them.
const (
	PathSlashesReject   = "reject"
	PathSlashesUnescape = "unescape"
	PathSlashesKeep     = "keep"
)

// validatePathSlashes checks [api] path_escaped_slashes.
func (a *API) validatePathSlashes(e *errs) {
	switch a.PathEscapedSlashes {
	case PathSlashesReject, PathSlashesUnescape, PathSlashesKeep:
	default:
		e.add("api.path_escaped_slashes", "%q must be %q, %q or %q", a.PathEscapedSlashes,
			PathSlashesReject, PathSlashesUnescape, PathSlashesKeep)
	}
}
