package engine

import "strings"

// NormalizePath is the path a gateway request is decided on, from the path
// as the client sent it (percent-encoded, without the query), normalised
// as Envoy's normalize_path and merge_slashes do, so that a rule about
// "/internal/metrics" also covers "//internal/metrics", "/./internal/metrics",
// "/x/../internal/metrics" and "/%69nternal/metrics":
//
//   - percent-escapes of unreserved characters (RFC 3986 §2.3: letters,
//     digits, "-", ".", "_", "~") are decoded; other escapes are kept, with
//     upper-case hex; a "%" that starts no escape becomes "%25";
//   - repeated slashes are merged;
//   - "." and ".." segments are removed (RFC 3986 §5.2.4); ".." never
//     climbs above the root; a path ending in one of them, or in "/",
//     keeps a trailing slash;
//   - the result starts with "/".
//
// Escaped slashes ("%2F") stay escaped, as in Envoy's default, so they
// neither split nor join segments here. The result is still escaped;
// NormalizePath(NormalizePath(p)) == NormalizePath(p) (FuzzNormalizePath).
// It is a plain function so that every gateway form (HTTP, ext_authz) can
// call it.
func NormalizePath(raw string) string {
	segs := strings.Split(normalizeEscapes(raw), "/")
	out := make([]string, 0, len(segs))
	for _, seg := range segs {
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	p := "/" + strings.Join(out, "/")
	if last := segs[len(segs)-1]; len(out) > 0 && (last == "" || last == "." || last == "..") {
		p += "/"
	}
	return p
}

// normalizeEscapes decodes escapes of unreserved characters and makes
// every other "%" part of a valid, upper-case escape.
func normalizeEscapes(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteString(strings.ToUpper(s[i+1 : i+3]))
			}
			i += 2
			continue
		}
		b.WriteString("%25")
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
