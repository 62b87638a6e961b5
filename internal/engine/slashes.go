package engine

import (
	"strings"

	"github.com/policyrollout/reconciler/internal/errs"
)

// EscapedSlashes says what GatewayPath does with a path that holds an
// escaped slash or backslash ("%2F", "%5C", any case) or a plain
// backslash. Such a path names two different resources: one for a backend
// that keeps the escape inside a segment, another for one that decodes it
// (or, for a backslash, treats it as a separator as Windows servers and
// browsers do). The values follow Envoy's path_with_escaped_slashes_action.
type EscapedSlashes uint8

// The actions; the zero value rejects, the one Envoy documents as the
// safest, since an authoriser cannot know which reading the backend takes.
const (
	// RejectEscapedSlashes refuses the path (Envoy's REJECT_REQUEST): the
	// gateway forms deny the check with INVALID_ARGUMENT.
	RejectEscapedSlashes EscapedSlashes = iota
	// UnescapeSlashes turns each of them into "/" before the path is
	// normalised, so "/%2Finternal/metrics" and "/internal\metrics" are
	// "/internal/metrics" (Envoy's UNESCAPE_AND_FORWARD, with normalize_path,
	// which reads a backslash as a slash).
	UnescapeSlashes
	// KeepEscapedSlashes leaves them as they are (Envoy's KEEP_UNCHANGED):
	// "%2F" and "%5C" stay escaped in the decoded path and a backslash is
	// an ordinary character, so rules about "/internal/" miss
	// "/%2Finternal/..." and "/internal\...". For backends known to read
	// them literally only.
	KeepEscapedSlashes
)

// The names of the actions in [api] path_escaped_slashes.
var escapedSlashesNames = [...]string{"reject", "unescape", "keep"}

// String returns the action's name in the configuration.
func (a EscapedSlashes) String() string {
	if int(a) < len(escapedSlashesNames) {
		return escapedSlashesNames[a]
	}
	return "unknown"
}

// ParseEscapedSlashes parses "reject", "unescape" or "keep".
func ParseEscapedSlashes(s string) (EscapedSlashes, bool) {
	for i, name := range escapedSlashesNames {
		if s == name {
			return EscapedSlashes(i), true
		}
	}
	return RejectEscapedSlashes, false
}

// ErrEscapedSlash is GatewayPath's refusal under RejectEscapedSlashes. Its
// message names no part of the path.
var ErrEscapedSlash = errs.Sentinel(errs.InvalidArgument,
	`the path holds an escaped slash ("%2F", "%5C") or a backslash, which this node refuses ([api] path_escaped_slashes = "reject")`)

// GatewayPath is the path a policy sees in every gateway form (:authorize,
// :mirror, ext_authz Check), from raw, the path as the client sent it
// (percent-encoded, without the query): escaped slashes and backslashes
// handled as a says, then NormalizePath (dot segments, repeated slashes,
// escaped unreserved characters), then percent-decoded, except that under
// KeepEscapedSlashes "%2F" and "%5C" stay escaped. It is the one function
// the gateway forms share, so that none of them reads a path differently
// (FuzzGatewayPath).
func GatewayPath(raw string, a EscapedSlashes) (string, error) {
	if hasSlashEscape(raw) {
		switch a {
		case RejectEscapedSlashes:
			return "", ErrEscapedSlash
		case UnescapeSlashes:
			raw = unescapeSlashes(raw)
		}
	}
	return decodePath(NormalizePath(raw), a == KeepEscapedSlashes), nil
}

// hasSlashEscape reports whether raw holds a backslash or an escape of
// "/" or "\". An escape is read as a unit, so "%252F" (an escaped "%"
// followed by "2F") holds none.
func hasSlashEscape(raw string) bool {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			return true
		case '%':
			if slashEscapeAt(raw, i) {
				return true
			}
			if i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]) {
				i += 2
			}
		}
	}
	return false
}

// slashEscapeAt reports whether s[i:] starts with "%2F" or "%5C", any case.
func slashEscapeAt(s string, i int) bool {
	if i+2 >= len(s) {
		return false
	}
	v := string([]byte{s[i+1], s[i+2] &^ 0x20}) // upper-case the letter
	return v == "2F" || v == "5C"
}

// unescapeSlashes turns backslashes and escapes of "/" and "\" into "/".
func unescapeSlashes(raw string) string {
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\\':
			b.WriteByte('/')
		case c == '%' && slashEscapeAt(raw, i):
			b.WriteByte('/')
			i += 2
		case c == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]):
			b.WriteString(raw[i : i+3])
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decodePath percent-decodes norm, a NormalizePath result (every "%"
// starts a valid upper-case escape), keeping "%2F" and "%5C" when keep.
func decodePath(norm string, keep bool) string {
	if !strings.Contains(norm, "%") {
		return norm
	}
	var b strings.Builder
	b.Grow(len(norm))
	for i := 0; i < len(norm); i++ {
		c := norm[i]
		if c != '%' || i+2 >= len(norm) {
			b.WriteByte(c)
			continue
		}
		if keep && slashEscapeAt(norm, i) {
			b.WriteString(norm[i : i+3])
		} else {
			b.WriteByte(unhex(norm[i+1])<<4 | unhex(norm[i+2]))
		}
		i += 2
	}
	return b.String()
}
