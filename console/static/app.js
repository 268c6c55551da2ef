// The console's router: #/page/arg?query. Each page renders into <main>
// and registers its timers on the context, which stops them when the user
// navigates away.
import { h, errorBox } from './lib.js';
import { overviewPage } from './overview.js';
import { topicsPage, topicPage, browsePage } from './topics.js';
import { groupsPage, groupPage } from './groups.js';
import { queuesPage, queuePage } from './queues.js';
import { storesPage, storePage } from './stores.js';
import { transactionsPage } from './transactions.js';
import { checkLogin, showLogin } from './login.js';

const routes = {
  overview: [overviewPage, overviewPage],
  topics: [topicsPage, topicPage],
  browse: [browsePage, browsePage],
  groups: [groupsPage, groupPage],
  queues: [queuesPage, queuePage],
  stores: [storesPage, storePage],
  transactions: [transactionsPage, transactionsPage],
};

let current = null;

class Context {
  constructor() { this.timers = []; this.alive = true; }
  // every runs fn now and then every ms until the page is left or fn
  // returns false; a run does not start before the previous one ended.
  every(ms, fn) {
    const tick = async () => {
      if (!this.alive) return;
      let again = true;
      try { again = await fn(); } catch (e) { console.warn(e); }
      if (this.alive && again !== false) this.timers.push(setTimeout(tick, ms));
    };
    tick();
  }
  stop() { this.alive = false; this.timers.forEach(clearTimeout); }
}

async function render() {
  if (current) current.stop();
  const ctx = new Context();
  current = ctx;
  const hash = location.hash.replace(/^#\/?/, '') || 'overview';
  const [path, query] = hash.split('?');
  const [name, ...rest] = path.split('/');
  const arg = rest.length ? decodeURIComponent(rest.join('/')) : '';
  const route = routes[name] || routes.overview;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.page === (routes[name] ? name : 'overview'));
  }
  const main = document.getElementById('app');
  const root = h('div', { 'data-page': name });
  main.replaceChildren(root);
  try {
    await (arg ? route[1] : route[0])(root, { arg, query: new URLSearchParams(query || ''), ctx });
  } catch (e) {
    root.append(errorBox(e));
  }
  root.setAttribute('data-loaded', 'true');
}

// A 401 from any call (the session ended, the password changed) stops
// the page and shows the login form; a login renders the page again.
window.addEventListener('broker-unauthorized', () => {
  if (current) current.stop();
  showLogin(render);
});
window.addEventListener('hashchange', () => { if (!document.getElementById('login-form')) render(); });
checkLogin(render);
