package admin

import "context"

// Call sends one request to an admin API route outside Operator (path
// under /admin/v1, such as the webhook routes), body as JSON if not nil,
// and decodes the answer into out. Errors are as the Operator methods'.
func (c *Client) Call(ctx context.Context, method, path string, body, out any) error {
	return c.call(ctx, method, path, nil, body, out)
}
