/**
 * GET /terminal: a full-window terminal, as the reference serves it
 * (handler/terminal/frontend.go: xterm.js 5.5 and its fit add-on from the
 * jsDelivr CDN, the socket at /terminal/ws?cols=&rows= on the page's own host,
 * reconnecting up to five times). One addition: a `token` in the page's own
 * query is passed on to the socket, since a browser cannot set headers on a
 * WebSocket and this agent checks its token itself (on the platform the edge
 * does). The simulator's console has its own terminal, bundled, with no CDN.
 */
export const TERMINAL_PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Terminal</title>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/@xterm/xterm@5.5.0/css/xterm.css">
<style>
  * { margin: 0; padding: 0; box-sizing: border-box; }
  html, body { height: 100%; width: 100%; overflow: hidden; background: #1a1b26; }
  #terminal { height: 100%; width: 100%; }
  .xterm { height: 100%; padding: 8px; }
  #status { position: fixed; top: 8px; right: 8px; padding: 4px 12px; border-radius: 4px; font: 12px monospace; z-index: 10; }
  .connecting { background: #e0af68; color: #1a1b26; }
  .connected { background: #9ece6a; color: #1a1b26; opacity: 0; }
  .disconnected { background: #f7768e; color: #1a1b26; }
</style>
</head>
<body>
<div id="status" class="connecting">Connecting...</div>
<div id="terminal"></div>
<script src="https://cdn.jsdelivr.net/npm/@xterm/xterm@5.5.0/lib/xterm.min.js"></script>
<script src="https://cdn.jsdelivr.net/npm/@xterm/addon-fit@0.10.0/lib/addon-fit.min.js"></script>
<script>
  const status = document.getElementById('status');
  const show = (cls, text) => { status.className = cls; status.textContent = text; };
  const term = new Terminal({ cursorBlink: true, fontSize: 14, fontFamily: 'Menlo, Monaco, "Courier New", monospace',
    theme: { background: '#1a1b26', foreground: '#c0caf5', cursor: '#c0caf5', selectionBackground: '#33467c' } });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById('terminal'));
  fit.fit();
  const own = new URLSearchParams(location.search);
  let ws = null, attempts = 0;
  function connect() {
    show('connecting', 'Connecting...');
    const q = new URLSearchParams({ cols: String(term.cols), rows: String(term.rows) });
    if (own.get('token')) q.set('token', own.get('token'));
    ws = new WebSocket((location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + location.host + location.pathname.replace(/\\/?$/, '/ws') + '?' + q);
    ws.onopen = () => { show('connected', 'Connected'); attempts = 0; term.focus(); };
    ws.onmessage = (event) => {
      const msg = JSON.parse(event.data);
      if (msg.type === 'output') term.write(msg.data);
      else if (msg.type === 'error') term.write('\\r\\n\\x1b[31mError: ' + msg.data + '\\x1b[0m\\r\\n');
    };
    ws.onclose = (event) => {
      show('disconnected', 'Disconnected');
      if (event.code === 1000) { term.write('\\r\\n\\x1b[90m[' + (event.reason || 'closed') + ']\\x1b[0m\\r\\n'); return; }
      if (attempts < 5) { attempts++; setTimeout(connect, 1000 * attempts); }
      else term.write('\\r\\n\\x1b[31mConnection lost. Refresh the page to reconnect.\\x1b[0m\\r\\n');
    };
  }
  term.onData((data) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'input', data })); });
  window.addEventListener('resize', () => {
    fit.fit();
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
  });
  connect();
</script>
</body>
</html>
`;
