//go:build windows

package store

import (
	"errors"
	"syscall"
)

// Windows errors that mean another handle holds the file, so a retry may succeed.
const (
	errorSharingViolation = syscall.Errno(32)   // ERROR_SHARING_VIOLATION
	errorLockViolation    = syscall.Errno(33)   // ERROR_LOCK_VIOLATION
	errorUserMappedFile   = syscall.Errno(1224) // ERROR_USER_MAPPED_FILE: SQLite's -shm mapping
)

// heldError reports whether err means that another handle holds the file. Access denied is
// included: Windows answers it for a file open without FILE_SHARE_DELETE that is renamed over
// or already marked for deletion. A file that is really read-only or not ours also answers it;
// then the retries end and the error is reported.
func heldError(err error) bool {
	return errors.Is(err, errorSharingViolation) || errors.Is(err, errorLockViolation) ||
		errors.Is(err, errorUserMappedFile) || errors.Is(err, syscall.ERROR_ACCESS_DENIED)
}
