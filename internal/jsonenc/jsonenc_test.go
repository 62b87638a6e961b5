package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", `q"uote`, `back\slash`, "nl\n\r\t", "\x00\x1f\x7f", "<a&b>", "é ü 日本",
		"\u2028\u2029", "bad\xffutf8", "\xed\xa0\x80", string(bytes.Repeat([]byte{0xc3}, 3)),
	} {
		checkString(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("<a&b>\u2028\xff")
	f.Fuzz(checkString)
}

func checkString(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString(nil, s); !bytes.Equal(got, want) {
		t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
	}
}
