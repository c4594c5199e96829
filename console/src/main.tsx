import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './style.css';
import { href, onLinkClick, useRoute } from './router.ts';
import { signOut, signedIn } from './session.ts';
import { SignIn } from './views/SignIn.tsx';
import { Collections } from './views/Collections.tsx';
import { ClassObjects } from './views/ClassObjects.tsx';
import { ObjectDetail } from './views/ObjectDetail.tsx';

function App() {
  const route = useRoute();
  const [authed, setAuthed] = useState(signedIn());
  // A 401 anywhere forgets the token (session.ts); views call this to show the sign-in form again.
  const recheck = () => setAuthed(signedIn());

  useEffect(() => {
    document.title = authed ? 'Inventory console' : 'Sign in · Inventory console';
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
