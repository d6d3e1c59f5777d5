package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// The rank's progress reports (engine/progress.py): the child is told where to write them
// (progressEnv, the lead pod's only), and the supervisor passes the latest on in its state,
// at most once per --progress-every, at most reportLimit bytes, never following a link
// the child planted there (the file is in a volume the child writes).
const (
	progressEnv = "TRAINOP_PROGRESS_FILE"
	reportLimit = 64 << 10
	reportDepth = 16 // Trainer's payload is 4 deep; the manager's reader goes no deeper
)

// report is what was last read of the progress file.
type report struct {
	doc     json.RawMessage // the report, compacted; nil where `problem`
	problem string          // why none could be read, in the manager's words
}

// readProgress reads the progress file where it changed since the last read and
// --progress-every has passed since then (or `progressNext` was reset: the rank ended, and
// its last report is passed on with its end); it says whether what the state shows
// changed.
func (s *supervisor) readProgress(now time.Time) bool {
	if s.opts.progress == "" || now.Before(s.progressNext) {
		return false
	}
	fd, err := syscall.Open(s.opts.progress, syscall.O_RDONLY|syscall.O_NOFOLLOW|
		syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false // none written yet (looked for again next tick), or mid-rename
	}
	s.progressNext = now.Add(s.opts.progressEvery)
	f := os.NewFile(uintptr(fd), s.opts.progress)
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false
	}
	seen := fmt.Sprintf("%d/%d/%d", info.ModTime().UnixNano(), info.Size(), inode(info))
	if seen == s.progressSeen {
		return false
	}
	s.progressSeen = seen
	var r report
	if !info.Mode().IsRegular() {
		r.problem = "the report is not a regular file"
	} else if data, err := io.ReadAll(io.LimitReader(f, reportLimit+1)); err != nil {
		return false
	} else {
		r = readReport(data)
	}
	if bytes.Equal(r.doc, s.progressNow.doc) && r.problem == s.progressNow.problem {
		return false
	}
	s.progressNow = r
	return true
}

// readReport is a report as the state passes it on: compact JSON of at most reportLimit
// bytes and reportDepth levels, or why it is not.
func readReport(data []byte) report {
	if len(data) > reportLimit {
		return report{problem: fmt.Sprintf("a report over the %d bytes one may hold", reportLimit)}
	}
	var compact bytes.Buffer
	if json.Compact(&compact, data) != nil || depth(compact.Bytes()) > reportDepth {
		return report{problem: "a report that is not JSON"}
	}
	return report{doc: compact.Bytes()}
}

// depth is how deeply compact, valid JSON nests its objects and arrays.
func depth(doc []byte) int {
	most, now, quoted, escaped := 0, 0, false, false
	for _, c := range doc {
		switch {
		case escaped:
			escaped = false
		case quoted:
			escaped, quoted = c == '\\', c != '"'
		case c == '"':
			quoted = true
		case c == '{' || c == '[':
			now++
			most = max(most, now)
		case c == '}' || c == ']':
			now--
		}
	}
	return most
}

func inode(info os.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
