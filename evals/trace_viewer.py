"""A small offline viewer for a run directory's ``traces.jsonl`` and the ``traces`` CLI.

``serve(run_dir)`` starts a standard-library HTTP server on loopback in a background thread:

* ``GET /``               one HTML page (inline CSS and JS, no external assets) that draws
  the run tree: collapsible, with run type, name, duration and token counts; click a run
  to see its inputs, outputs, error and metadata.
* ``GET /api/runs``       the runs of traces.jsonl as a JSON list (``?summary=1``: without
  inputs, outputs and extra, which is what the page loads first).
* ``GET /api/runs/<id>``  one run, in full.

``traces_app`` is a Typer app with ``export`` and ``view`` (mounted as ``cooplab traces``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, unquote, urlsplit

import typer

TRACES_FILE = "traces.jsonl"
_SUMMARY_DROP = ("inputs", "outputs", "extra", "events", "serialized")
_MAX_SUMMARY_ERROR = 300


def _traces_path(run_dir: str | os.PathLike[str]) -> Path:
    p = Path(run_dir)
    return p if p.is_file() else p / TRACES_FILE


class _RunCache:
    """The runs of one traces file, re-read only when the file changes (it grows while a
    run is in progress). Lines that are not JSON run objects are skipped and counted."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[float, int] | None = None
        self.runs: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.bad_lines = 0

    def get(self) -> "_RunCache":
        try:
            st = self.path.stat()
            stamp = (st.st_mtime, st.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._load(stamp)
            return self

    def _load(self, stamp: tuple[float, int] | None) -> None:
        runs, bad = [], 0
        if stamp is not None:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        bad += 1
                        continue
                    if isinstance(rec, dict) and rec.get("id"):
                        runs.append(rec)
                    else:
                        bad += 1
        self.runs, self.bad_lines, self._stamp = runs, bad, stamp
        self.by_id = {str(r["id"]): r for r in runs}


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in run.items() if k not in _SUMMARY_DROP}
    meta = ((run.get("extra") or {}).get("metadata") or {}) if isinstance(run.get("extra"), dict) else {}
    for k in ("langgraph_node", "langgraph_step", "ls_model_name", "ls_provider"):
        if k in meta:
            out[k] = meta[k]
    usage = (run.get("extra") or {}).get("usage_metadata") if isinstance(run.get("extra"), dict) else None
    if isinstance(usage, dict) and "total_tokens" not in out:
        out["prompt_tokens"] = usage.get("input_tokens")
        out["completion_tokens"] = usage.get("output_tokens")
        out["total_tokens"] = usage.get("total_tokens")
    err = out.get("error")
    if isinstance(err, str) and len(err) > _MAX_SUMMARY_ERROR:
        out["error"] = err[:_MAX_SUMMARY_ERROR] + "..."
    return out


def _make_handler(cache: _RunCache, title: str):
    page = _PAGE.replace("__TITLE__", _html_escape(title)).encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        server_version = "cooplab-traces/1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header(
                "Content-Security-Policy",
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                "connect-src 'self'; img-src data:",
            )
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, code: int, obj: Any) -> None:
            body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            self._send(code, body, "application/json; charset=utf-8")

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802
            try:
                url = urlsplit(self.path)
                path = url.path.rstrip("/") or "/"
                if path in ("/", "/index.html"):
                    self._send(200, page, "text/html; charset=utf-8")
                elif path == "/api/runs":
                    c = cache.get()
                    q = parse_qs(url.query)
                    summary = q.get("summary", ["0"])[0] not in ("0", "false", "")
                    runs = [_summary(r) for r in c.runs] if summary else c.runs
                    self._json(200, runs)
                elif path.startswith("/api/runs/"):
                    rid = unquote(path[len("/api/runs/"):])
                    run = cache.get().by_id.get(rid)
                    if run is None:
                        self._json(404, {"error": f"no run {rid}"})
                    else:
                        self._json(200, run)
                elif path == "/api/info":
                    c = cache.get()
                    self._json(200, {"title": title, "file": str(c.path), "exists": c.path.is_file(),
                                     "runs": len(c.runs), "bad_lines": c.bad_lines})
                else:
                    self._json(404, {"error": "not found"})
            except (BrokenPipeError, ConnectionResetError):
                pass
            except Exception as exc:  # keep serving
                try:
                    self._json(500, {"error": f"{type(exc).__name__}: {exc}"})
                except Exception:
                    pass

    return Handler


def serve(run_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``run_dir``'s traces on ``host:port`` (0: any free port) from a daemon thread.
    Returns ``(server, url)``; stop with ``server.shutdown(); server.server_close()``."""
    path = _traces_path(run_dir)
    cache = _RunCache(path)
    title = str(Path(run_dir))
    server = ThreadingHTTPServer((host, port), _make_handler(cache, title))
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, name="trace-viewer", daemon=True)
    t.start()
    h, p = server.server_address[:2]
    shown = f"[{h}]" if ":" in str(h) else h
    return server, f"http://{shown}:{p}/"


def view(run_dir: str | os.PathLike[str], port: int = 0, open_browser: bool = False, *,
         host: str = "127.0.0.1", block: bool = True) -> tuple[ThreadingHTTPServer, str]:
    """Start the viewer, print its URL, and (``block``) wait until Ctrl-C, then stop it."""
    server, url = serve(run_dir, host=host, port=port)
    print(f"trace viewer for {run_dir}: {url}  (Ctrl-C to stop)" if block else url, flush=True)
    if open_browser:
        try:
            webbrowser.open(url)
        except Exception:
            pass
    if not block:
        return server, url
    try:
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("trace viewer stopped", file=sys.stderr)
    finally:
        server.shutdown()
        server.server_close()
    return server, url


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# ----------------------------------------------------------------------------------------
# CLI: mounted by cooplab as "cooplab traces ..."
traces_app = typer.Typer(
    help="Traces of graph runs (LangSmith run format, RUN_DIR/traces.jsonl): export or view them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _fail(msg: str, code: int = 2) -> None:
    typer.echo(f"cooplab: error: {msg}", err=True)
    raise typer.Exit(code)


def _check_dir(run_dir: Path) -> Path:
    if not run_dir.exists():
        _fail(f"{run_dir} does not exist")
    path = _traces_path(run_dir)
    if not path.is_file():
        _fail(f"no {TRACES_FILE} in {run_dir} (traces are written when a graph run ends)")
    return path


@traces_app.command("export")
def export_cmd(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="A run directory holding traces.jsonl (or the file itself)."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="LangSmith-compatible API URL (default: $LANGSMITH_ENDPOINT, else LangSmith's)."),
    project: Optional[str] = typer.Option(None, "--project", help="Project to file the runs under (default: $LANGSMITH_PROJECT, else 'cooplab')."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Send a finished run's traces to LangSmith (or a compatible server); the API key is read
    from $LANGSMITH_API_KEY, never from the command line."""
    from cooplab.graphs.tracing import ExportConfigError, ExportError, TraceFileError, export_traces

    _check_dir(run_dir)
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        _fail(f"--endpoint must be an http(s) URL, got {endpoint!r}")
    try:
        n = export_traces(run_dir, endpoint=endpoint, project=project)
    except (TraceFileError, ExportConfigError) as exc:
        _fail(str(exc))
    except ExportError as exc:
        _fail(str(exc), code=1)
    dest = endpoint or os.environ.get("LANGSMITH_ENDPOINT") or "LangSmith"
    proj = project or os.environ.get("LANGSMITH_PROJECT") or "cooplab"
    if as_json:
        typer.echo(json.dumps({"runs": n, "endpoint": dest, "project": proj, "file": str(_traces_path(run_dir))}))
    else:
        typer.echo(f"exported {n} runs from {_traces_path(run_dir)} to {dest} (project {proj})")


@traces_app.command("view")
def view_cmd(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="A run directory holding traces.jsonl (or the file itself)."),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0: any free port)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
    no_block: bool = typer.Option(False, "--no-block", help="Start, print the URL and return (for scripts and tests)."),
) -> None:
    """Browse a run's trace tree in a local, offline web page (127.0.0.1 only)."""
    _check_dir(run_dir)
    if not 0 <= port <= 65535:
        _fail(f"--port must be between 0 and 65535, got {port}")
    try:
        view(run_dir, port, open_browser, block=not no_block)
    except OSError as exc:
        _fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")


# ----------------------------------------------------------------------------------------
_PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>traces: __TITLE__</title>
<style>
:root{--bg:#fafafa;--fg:#1d1d1f;--mut:#6b7280;--line:#e5e7eb;--sel:#dbeafe;--chain:#2563eb;--llm:#9333ea;--tool:#d97706;--other:#4b5563;--err:#dc2626}
*{box-sizing:border-box}
body{margin:0;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header{padding:10px 16px;border-bottom:1px solid var(--line);background:#fff;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:15px;margin:0}
#stats{color:var(--mut)}
#stats b{color:var(--fg)}
input[type=search]{padding:4px 8px;border:1px solid var(--line);border-radius:4px;min-width:200px}
button{padding:3px 8px;border:1px solid var(--line);background:#fff;border-radius:4px;cursor:pointer}
main{display:flex;height:calc(100vh - 52px)}
#tree{flex:1 1 55%;overflow:auto;padding:8px 0;border-right:1px solid var(--line);background:#fff}
#detail{flex:1 1 45%;overflow:auto;padding:12px 16px}
.row{display:flex;align-items:center;gap:8px;padding:2px 8px;cursor:pointer;white-space:nowrap}
.row:hover{background:#f3f4f6}
.row.sel{background:var(--sel)}
.tog{width:14px;color:var(--mut);text-align:center;flex:none}
.badge{font-size:11px;padding:0 6px;border-radius:8px;color:#fff;flex:none}
.t-chain{background:var(--chain)}.t-llm{background:var(--llm)}.t-tool{background:var(--tool)}.t-other{background:var(--other)}
.name{font-weight:600;overflow:hidden;text-overflow:ellipsis}
.dur,.tok{color:var(--mut);font-variant-numeric:tabular-nums}
.tok{color:#7c3aed}
.errflag{color:var(--err);font-weight:700}
.kids{margin-left:16px;border-left:1px dotted var(--line)}
.collapsed>.kids{display:none}
.hidden{display:none}
h2{font-size:14px;margin:4px 0 8px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 12px}
dt{color:var(--mut)}dd{margin:0;word-break:break-all}
pre{background:#fff;border:1px solid var(--line);border-radius:4px;padding:8px;overflow:auto;max-height:45vh;white-space:pre-wrap;word-break:break-word;margin:0 0 10px}
.msg{border-left:3px solid var(--llm);padding:2px 8px;margin:4px 0;background:#fff;white-space:pre-wrap}
.msg .role{color:var(--mut);font-size:11px;text-transform:uppercase}
.error{color:var(--err)}
.muted{color:var(--mut)}
</style></head>
<body>
<header><h1 title="click a run for details; click its arrow or double-click it to open or close">traces: __TITLE__</h1><span id="stats">loading&hellip;</span>
<input id="q" type="search" placeholder="filter by name / type">
<button id="expand">expand all</button><button id="collapse">collapse all</button></header>
<main><div id="tree" role="tree"></div><div id="detail"><p class="muted">Click a run to see its inputs and outputs.</p></div></main>
<script>
"use strict";
const $ = (s) => document.querySelector(s);
function el(tag, cls, text){const e=document.createElement(tag); if(cls) e.className=cls; if(text!==undefined&&text!==null) e.textContent=String(text); return e;}
function secs(r){ if(!r.start_time||!r.end_time) return null; const d=(Date.parse(r.end_time)-Date.parse(r.start_time))/1000; return isNaN(d)?null:d; }
function fmtDur(d){ if(d===null) return "running"; if(d<1) return (d*1000).toFixed(d<0.01?1:0)+" ms"; if(d<120) return d.toFixed(2)+" s"; return (d/60).toFixed(1)+" min"; }
function typeClass(t){ return ["chain","llm","tool"].includes(t)?"t-"+t:"t-other"; }
function fmtTok(i,o,t){ return (t||0)+" tok ("+(i||0)+" in / "+(o||0)+" out)"; }

let runs=[], byId=new Map(), kids=new Map(), rowOf=new Map(), selected=null;

function build(list){
  runs=list; byId=new Map(list.map(r=>[r.id,r])); kids=new Map();
  const roots=[];
  for(const r of list){
    if(r.parent_run_id && byId.has(r.parent_run_id)){
      if(!kids.has(r.parent_run_id)) kids.set(r.parent_run_id,[]);
      kids.get(r.parent_run_id).push(r);
    } else roots.push(r);
  }
  const ord=(a,b)=>String(a.dotted_order||a.start_time||"").localeCompare(String(b.dotted_order||b.start_time||""));
  roots.sort(ord); for(const v of kids.values()) v.sort(ord);
  // token totals of each subtree (own llm tokens + children)
  const memo=new Map();
  function agg(r){
    if(memo.has(r.id)) return memo.get(r.id);
    const a={i:r.prompt_tokens||0,o:r.completion_tokens||0,t:r.total_tokens||0,llm:r.run_type==="llm"?1:0};
    memo.set(r.id,a);
    for(const c of (kids.get(r.id)||[])){const b=agg(c); a.i+=b.i;a.o+=b.o;a.t+=b.t;a.llm+=b.llm;}
    return a;
  }
  for(const r of roots) agg(r);
  return {roots,agg:memo};
}

function node(r, depth, agg){
  const wrap=el("div","node"+(depth>=1?" collapsed":"")); wrap.setAttribute("role","treeitem");
  const row=el("div","row"); row.dataset.id=r.id; row.style.paddingLeft=(8)+"px";
  const ch=kids.get(r.id)||[];
  const tog=el("span","tog",ch.length?(depth>=1?"\u25B8":"\u25BE"):"");
  row.append(tog, el("span","badge "+typeClass(r.run_type), r.run_type||"?"), el("span","name",r.name||"(unnamed)"));
  row.append(el("span","dur",fmtDur(secs(r))));
  const a=agg.get(r.id);
  if(r.run_type==="llm" && (r.total_tokens||r.prompt_tokens||r.completion_tokens)) row.append(el("span","tok",fmtTok(r.prompt_tokens,r.completion_tokens,r.total_tokens)));
  else if(a && a.t) row.append(el("span","tok","\u03A3 "+fmtTok(a.i,a.o,a.t)+", "+a.llm+" llm"));
  if(r.error) row.append(el("span","errflag","error"));
  if(r.langgraph_step!==undefined && r.run_type!=="llm") row.append(el("span","dur","step "+r.langgraph_step));
  if(depth===0 && r.start_time){ const t=new Date(r.start_time); row.append(el("span","dur",isNaN(t)?r.start_time:t.toISOString().replace("T"," ").slice(0,19)+" UTC")); }
  row.title=(r.run_type||"")+" "+(r.name||"")+" — "+r.id;
  row.addEventListener("click",(ev)=>{ if(ev.target===tog && ch.length){toggle(wrap,tog);} else select(r.id); });
  row.addEventListener("dblclick",()=>{ if(ch.length) toggle(wrap,tog); });
  wrap.append(row); rowOf.set(r.id,row);
  if(ch.length){ const k=el("div","kids"); k.setAttribute("role","group"); for(const c of ch) k.append(node(c,depth+1,agg)); wrap.append(k); }
  return wrap;
}
function toggle(wrap,tog){ wrap.classList.toggle("collapsed"); tog.textContent=wrap.classList.contains("collapsed")?"\u25B8":"\u25BE"; }
function setAll(collapsed){ document.querySelectorAll("#tree .node").forEach(n=>{ const t=n.querySelector(":scope>.row>.tog"); if(!t||!t.textContent) return; n.classList.toggle("collapsed",collapsed); t.textContent=collapsed?"\u25B8":"\u25BE"; }); }

function contentText(c){ if(typeof c==="string") return c; if(Array.isArray(c)) return c.map(p=>typeof p==="string"?p:(p&&p.text)||JSON.stringify(p)).join("\n"); return JSON.stringify(c); }
function messagesOf(inputs){
  if(!inputs||!Array.isArray(inputs.messages)) return null;
  const out=[]; for(const batch of inputs.messages){ for(const m of (Array.isArray(batch)?batch:[batch])){
    const k=(m&&m.kwargs)||m||{}; const id=(m&&Array.isArray(m.id))?m.id[m.id.length-1]:""; out.push({role:k.type||id||k.role||"message",text:contentText(k.content)}); } }
  return out;
}
function outputText(r){
  try{ const g=r.outputs.generations; const texts=[]; for(const b of g) for(const x of b) texts.push(x.text||contentText(((x.message||{}).kwargs||x.message||{}).content)); return texts; }catch(e){ return null; }
}
function section(parent,title,obj){ parent.append(el("h2",null,title)); parent.append(el("pre",null,JSON.stringify(obj,null,2))); }

async function select(id){
  if(selected&&rowOf.has(selected)) rowOf.get(selected).classList.remove("sel");
  selected=id; if(rowOf.has(id)) rowOf.get(id).classList.add("sel");
  const d=$("#detail"); d.replaceChildren(el("p","muted","loading\u2026"));
  let r;
  try{ const res=await fetch("api/runs/"+encodeURIComponent(id)); r=await res.json(); if(!res.ok) throw new Error(r.error||res.status); }
  catch(e){ d.replaceChildren(el("p","error","could not load run: "+e)); return; }
  d.replaceChildren();
  d.append(el("h2",null,(r.run_type||"")+": "+(r.name||"")));
  const dl=el("dl");
  const add=(k,v)=>{ if(v===undefined||v===null||v==="") return; dl.append(el("dt",null,k), el("dd",null,v)); };
  add("id",r.id); add("parent",r.parent_run_id); add("trace",r.trace_id); add("start",r.start_time); add("end",r.end_time);
  add("duration",fmtDur(secs(r))); add("status",r.status);
  if(r.total_tokens||r.prompt_tokens) add("tokens",fmtTok(r.prompt_tokens,r.completion_tokens,r.total_tokens));
  if(r.tags&&r.tags.length) add("tags",r.tags.join(", "));
  const meta=(r.extra&&r.extra.metadata)||{}; if(meta.langgraph_node) add("node",meta.langgraph_node); if(meta.langgraph_step!==undefined) add("step",meta.langgraph_step);
  if(meta.ls_model_name) add("model",meta.ls_model_name);
  d.append(dl);
  if(r.error){ d.append(el("h2","error","error")); d.append(el("pre","error",r.error)); }
  const msgs=messagesOf(r.inputs);
  if(msgs){ d.append(el("h2",null,"messages")); for(const m of msgs){ const b=el("div","msg"); b.append(el("div","role",m.role), el("div",null,m.text)); d.append(b);} }
  const outs=r.run_type==="llm"?outputText(r):null;
  if(outs){ d.append(el("h2",null,"answer")); for(const t of outs){ const b=el("div","msg"); b.append(el("div","role","ai"), el("div",null,t)); d.append(b);} }
  section(d,"inputs",r.inputs); section(d,"outputs",r.outputs); section(d,"extra",r.extra);
}

function filter(q){
  q=q.trim().toLowerCase();
  const show=new Set();
  if(q){ for(const r of runs){ if(((r.name||"")+" "+(r.run_type||"")).toLowerCase().includes(q)){ let x=r; while(x){ show.add(x.id); x=x.parent_run_id?byId.get(x.parent_run_id):null; } } } }
  for(const [id,row] of rowOf){ row.parentElement.classList.toggle("hidden", !!q && !show.has(id)); }
  if(q) setAll(false);
}

async function load(){
  let list, info={};
  try{ const res=await fetch("api/runs?summary=1"); list=await res.json(); if(!res.ok) throw new Error(list.error||res.status);
       info=await (await fetch("api/info")).json(); }
  catch(e){ $("#stats").replaceChildren(el("span","error","could not load runs: "+e)); return; }
  const {roots,agg}=build(list);
  const tree=$("#tree"); const frag=document.createDocumentFragment(); rowOf=new Map();
  for(const r of roots) frag.append(node(r,0,agg));
  tree.replaceChildren(frag);
  if(!list.length) tree.append(el("p","muted"," no runs yet"+(info.exists===false?" (no traces.jsonl)":"")));
  let ti=0,to=0,tt=0,llm=0,err=0; for(const r of list){ if(r.run_type==="llm"){llm++; ti+=r.prompt_tokens||0; to+=r.completion_tokens||0; tt+=r.total_tokens||0;} if(r.error) err++; }
  const s=$("#stats"); s.replaceChildren();
  const stat=(v,l)=>{ s.append(el("b",null,v), document.createTextNode(" "+l+"  ")); };
  stat(roots.length,"traces"); stat(list.length,"runs"); stat(llm,"llm calls"); stat(tt,"tokens ("+ti+" in / "+to+" out)"); stat(err,"errors");
  if(info.bad_lines) stat(info.bad_lines,"unreadable lines");
  applyHash();
  document.body.dataset.loaded="1";
}
function reveal(id){ let r=byId.get(id); while(r&&r.parent_run_id&&byId.has(r.parent_run_id)){ const row=rowOf.get(r.parent_run_id); const n=row&&row.parentElement; if(n&&n.classList.contains("collapsed")) toggle(n,row.querySelector(".tog")); r=byId.get(r.parent_run_id);} }
function applyHash(){
  // #expand=all opens every node; #run=<id> opens its ancestors and shows it
  const h=new URLSearchParams(location.hash.replace(/^#/,""));
  if(h.get("expand")==="all") setAll(false);
  const id=h.get("run"); if(id&&byId.has(id)){ reveal(id); select(id); const row=rowOf.get(id); if(row&&row.scrollIntoView) row.scrollIntoView({block:"center"}); }
}
window.addEventListener("hashchange",applyHash);
$("#q").addEventListener("input",(e)=>filter(e.target.value));
$("#expand").addEventListener("click",()=>setAll(false));
$("#collapse").addEventListener("click",()=>setAll(true));
load();
</script>
</body></html>
"""
