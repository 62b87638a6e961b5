package config

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in the file as a Go duration string
// ("30s", "1m30s"), which reads better than a number of nanoseconds.
type Duration struct {
	time.Duration
}

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"30s\"", text)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as UnmarshalText reads it.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}
