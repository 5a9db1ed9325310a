package main

// The kubelet log API of a process-pool node: a container's output file, as GetContainerLogs serves it.

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// maxLogRead bounds what one log request reads of a file (the API server streams it to the client).
const maxLogRead = 16 << 20

// GetContainerLogs serves the container's output file: tailLines and limitBytes as a kubelet does,
// follow until the container has exited. Timestamps, sinceSeconds and previous are not kept here (no
// restarts in place: a restarted pod is a new pod).
func (p *provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string,
	opts api.ContainerLogOpts) (io.ReadCloser, error) {
	_, c, err := p.container(namespace, podName, containerName)
	if err != nil {
		return nil, err
	}
	if opts.Previous {
		return nil, errdefs.NotFoundf("previous terminated container %q in pod %q not found", containerName, podName)
	}
	f, err := os.Open(c.logPath)
	if err != nil {
		return io.NopCloser(strings.NewReader("")), nil // not started yet: nothing written
	}
	if opts.Tail > 0 {
		if err := seekTail(f, opts.Tail); err != nil {
			f.Close()
			return nil, err
		}
	}
	var r io.Reader = f
	if opts.Follow {
		r = &follower{ctx: ctx, f: f, finished: c.finished}
	}
	limit := int64(maxLogRead)
	if opts.LimitBytes > 0 && int64(opts.LimitBytes) < limit {
		limit = int64(opts.LimitBytes)
	}
	if !opts.Follow || opts.LimitBytes > 0 {
		r = io.LimitReader(r, limit)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, f}, nil
}

// seekTail positions f at the start of its last n lines, reading at most maxLogRead from the end.
func seekTail(f *os.File, n int) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	start := size - maxLogRead
	if start < 0 {
		start = 0
	}
	buf := make([]byte, size-start)
	if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
		return err
	}
	body := bytes.TrimSuffix(buf, []byte("\n"))
	cut := len(body)
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(body[:cut], '\n')
		if j < 0 {
			cut = -1
			break
		}
		cut = j
	}
	_, err = f.Seek(start+int64(cut+1), io.SeekStart)
	return err
}

// follower reads a growing file until the container has exited and everything is read.
type follower struct {
	ctx      context.Context
	f        *os.File
	finished chan struct{}
}

func (fl *follower) Read(b []byte) (int, error) {
	for {
		n, err := fl.f.Read(b)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		select {
		case <-fl.finished:
			// One last read: what was written between the read above and the exit.
			n, err := fl.f.Read(b)
			if n > 0 {
				return n, nil
			}
			return 0, err
		case <-fl.ctx.Done():
			return 0, io.EOF
		case <-time.After(200 * time.Millisecond):
		}
	}
}
