//go:build unix

package preview

import "syscall"

// freeSpace is the space an unprivileged process may still use on the
// file system holding dir.
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // the field types differ between systems
}
