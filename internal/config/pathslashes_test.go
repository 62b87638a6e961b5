package config

import (
	"strings"
	"testing"
)

// TestPathEscapedSlashes: [api] path_escaped_slashes rejects by default
// (a protection that needs no configuration) and takes only its three
// values.
func TestPathEscapedSlashes(t *testing.T) {
	if v := Default().API.PathEscapedSlashes; v != "reject" {
		t.Errorf("default path_escaped_slashes = %q, want reject", v)
	}
	for _, v := range []string{"reject", "unescape", "keep"} {
		c, err := Parse([]byte("[api]\npath_escaped_slashes = \""+v+"\"\n"), "")
		if err != nil || c.API.PathEscapedSlashes != v {
			t.Errorf("%s: %+v, %v", v, c, err)
		}
	}
	_, err := Parse([]byte("[api]\npath_escaped_slashes = \"UNESCAPE_AND_FORWARD\"\n"), "")
	if err == nil || !strings.Contains(err.Error(), `api.path_escaped_slashes: "UNESCAPE_AND_FORWARD" must be "reject", "unescape" or "keep"`) {
		t.Errorf("an unknown value: %v", err)
	}
}
