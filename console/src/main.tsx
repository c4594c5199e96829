import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './style.css';
import { href, onLinkClick, useRoute } from './router.ts';
import { signOut, signedIn } from './session.ts';
import { SignIn } from './views/SignIn.tsx';
import { Collections } from './views/Collections.tsx';
import { ClassObjects } from './views/ClassObjects.tsx';
import { ObjectDetail } from './views/ObjectDetail.tsx';
import { Audit } from './views/Audit.tsx';
import { Tasks } from './views/Tasks.tsx';
import { Deliveries } from './views/Deliveries.tsx';
import { Search } from './views/Search.tsx';
import { loadAccess, resetAccess } from './access.ts';

function App() {
  const route = useRoute();
  const [authed, setAuthed] = useState(signedIn());
  // A 401 anywhere forgets the token (session.ts); views call this to show the sign-in form again.
  const recheck = () => {
    resetAccess();
    setAuthed(signedIn());
  };
  // Admin-only views are hidden (not merely refused) for everyone else; null while unknown.
  const [admin, setAdmin] = useState<boolean | null>(null);

  useEffect(() => {
    document.title = authed ? 'Inventory console' : 'Sign in · Inventory console';
    setAdmin(null);
    if (authed)
      loadAccess().then(
        (a) => setAdmin(a.admin),
        () => {
          if (!signedIn()) recheck();
        },
      );
  }, [authed]);

  if (!authed) return <SignIn onSignedIn={recheck} />;
  return (
    <div class="shell" onClick={onLinkClick}>
      <header class="top">
        <a class="brand" href={href({ view: 'collections' })}>
          Inventory console
        </a>
        <nav aria-label="Main">
          <a href={href({ view: 'collections' })}>Collections</a>
          <a href={href({ view: 'search' })}>Search</a>
          <a href={href({ view: 'tasks' })}>Tasks</a>
          <a href={href({ view: 'audit' })}>Audit events</a>
          {admin && <a href={href({ view: 'deliveries' })}>Delivery health</a>}
        </nav>
        <button type="button" onClick={() => void signOut().then(recheck)}>
          Sign out
        </button>
      </header>
      <main id="main">
        {route.view === 'collections' && <Collections onAuthLost={recheck} />}
        {route.view === 'class' && <ClassObjects key={route.classId} classId={route.classId} onAuthLost={recheck} />}
        {route.view === 'object' && (
          <ObjectDetail key={`${route.classId}/${route.objectId}`} classId={route.classId} objectId={route.objectId} onAuthLost={recheck} />
        )}
        {route.view === 'audit' && <Audit onAuthLost={recheck} />}
        {route.view === 'tasks' && <Tasks onAuthLost={recheck} />}
        {route.view === 'search' && <Search onAuthLost={recheck} />}
        {route.view === 'deliveries' &&
          (admin ? (
            <Deliveries onAuthLost={recheck} />
          ) : (
            <section>
              <h1>Delivery health</h1>
              <p>{admin === null ? 'Loading…' : 'Only administrators see delivery health.'}</p>
            </section>
          ))}
        {route.view === 'not-found' && (
          <section>
            <h1>Not found</h1>
            <p>The console has no page at {route.path}.</p>
          </section>
        )}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
