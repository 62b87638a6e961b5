//go:build !unix

package preview

import "errors"

// freeSpace is not measured here: the watermark is not applied.
func freeSpace(string) (int64, error) { return 0, errors.ErrUnsupported }
