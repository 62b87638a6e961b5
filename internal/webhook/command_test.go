package webhook

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
		verb string
		args []string
		err  string
	}{
		{"/reconciler preview start", true, VerbPreview, []string{"start"}, ""},
		{"/reconciler preview stop", true, VerbPreview, []string{"stop"}, ""},
		{"  /RECONCILER  Preview\tSTOP  ", true, VerbPreview, []string{"stop"}, ""},
		{"/reconciler status\r\n/reconciler commit", true, VerbStatus, nil, ""},
		{"/reconciler commit", true, VerbCommit, nil, ""},
		{"/reconciler help", true, VerbHelp, nil, ""},
		{"/reconciler", true, VerbHelp, nil, ""},
		{"/reconciler preview", true, VerbHelp, nil, "usage: /reconciler preview start|stop"},
		{"/reconciler preview go", true, VerbHelp, nil, "usage: /reconciler preview start|stop"},
		{"/reconciler commit now", true, VerbHelp, nil, "/reconciler commit takes no arguments"},
		{"/reconciler deploy", true, VerbHelp, nil, `unknown command "deploy"`},
		{"/reconciler " + strings.Repeat("x", 100), true, VerbHelp, nil, `unknown command "` + strings.Repeat("x", 40) + `…"`},
		{"/reconcilerx status", false, "", nil, ""},
		{"please /reconciler status", false, "", nil, ""},
		{"\n/reconciler status", false, "", nil, ""},
		{"", false, "", nil, ""},
	} {
		got, ok := ParseCommand(c.body)
		if ok != c.ok || got.Verb != c.verb || !reflect.DeepEqual(got.Args, c.args) || got.Error != c.err {
			t.Errorf("ParseCommand(%q) = %+v, %v", c.body, got, ok)
		}
	}
}
