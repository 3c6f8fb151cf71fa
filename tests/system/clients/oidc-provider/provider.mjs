// The OpenID provider the single sign-on tests sign in at: npm's oidc-provider with one static
// client, a few test users and a login form an HTTP client can post, on the loopback port given.
// Beside the provider, loopback-only /admin endpoints let a test rotate the signing key, tamper
// with the next ID token (to check that the service refuses it) and sign a back-channel logout
// token with the provider's own key.
//
//   node provider.mjs PORT REDIRECT_URI BACKCHANNEL_URI
//
// It prints "ready <issuer>" once it listens.

import http from "node:http";
import crypto from "node:crypto";
import * as jose from "jose";
import Provider from "oidc-provider";

const [port, redirectUri, backchannelUri] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
export const CLIENT_ID = "filehost";
export const CLIENT_SECRET = "filehost-test-secret";

// sub -> claims. amr says how the user signed in here (the login form's mfa box adds "otp").
const USERS = {
  alice: { email: "alice@example.com", email_verified: true, name: "Alice" },
  bob: { email: "bob@example.com", email_verified: false, name: "Bob" },
  carol: { email: "carol@other.org", email_verified: true, name: "Carol" },
  dave: { email: "dave@example.com", email_verified: true, name: "Dave" },
  erin: { email: "erin@example.com", email_verified: true, name: "Erin" },
  frank: { email: "frank@example.com", email_verified: true, name: "Frank" },
};

async function newKey() {
  const { privateKey } = await jose.generateKeyPair("RS256", { extractable: true });
  const jwk = await jose.exportJWK(privateKey);
  return { ...jwk, kid: crypto.randomUUID(), alg: "RS256", use: "sig" };
}

let keys = [await newKey()]; // the first signs; the others are still published
let provider = makeProvider();
// What the next ID token from the token endpoint becomes: null, or {claims, alg, key}.
let tamper = null;

function makeProvider() {
  const made = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        redirect_uris: [redirectUri],
        response_types: ["code"],
        grant_types: ["authorization_code"],
        token_endpoint_auth_method: "client_secret_basic",
        backchannel_logout_uri: backchannelUri,
        // RP-initiated logout sends the browser back to the dashboard's login page.
        post_logout_redirect_uris: [new URL("/", redirectUri).href],
        backchannel_logout_session_required: true,
        require_auth_time: true,
      },
    ],
    jwks: { keys },
    claims: {
      // acr and amr with every ID token: how the user signed in here.
      openid: ["sub", "acr", "amr"],
      email: ["email", "email_verified"],
      profile: ["name"],
    },
    conformIdTokenClaims: false, // the e-mail in the ID token itself, as most providers do
    features: {
      devInteractions: { enabled: false },
      backchannelLogout: { enabled: true },
    },
    pkce: { required: () => true },
    ttl: { Session: 3600, Interaction: 600, Grant: 3600, IdToken: 600, AccessToken: 600 },
    async findAccount(ctx, sub) {
      if (!USERS[sub]) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...USERS[sub] }) };
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    // A first-party client: every scope asked for is granted without a consent page.
    async loadExistingGrant(ctx) {
      const existing = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (existing) {
        const found = await ctx.oidc.provider.Grant.find(existing);
        if (found) return found;
      }
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope("openid email profile");
      grant.addOIDCClaims(["email", "email_verified", "name"]);
      await grant.save();
      return grant;
    },
  });
  made.proxy = false;
  made.use(async (ctx, next) => {
    await next();
    if (ctx.path === "/token" && ctx.status === 200 && tamper && ctx.body?.id_token) {
      ctx.body = { ...ctx.body, id_token: await tampered(ctx.body.id_token, tamper) };
      tamper = null;
    }
  });
  return made;
}

async function tampered(idToken, change) {
  const claims = { ...jose.decodeJwt(idToken), ...change.claims };
  for (const [name, value] of Object.entries(claims)) if (value === null) delete claims[name];
  if (change.alg === "none") {
    const part = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
    return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
  }
  // Signed by a key of its own ("foreign": one the provider never published) or by the
  // provider's, with the claims changed.
  const jwk = change.key === "foreign" ? await newKey() : keys[0];
  const key = await jose.importJWK(jwk, "RS256");
  return new jose.SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: jwk.kid }).sign(key);
}

async function logoutToken(query) {
  const claims = {
    iss: issuer,
    aud: CLIENT_ID,
    iat: Math.floor(Date.now() / 1000),
    jti: query.get("jti") || crypto.randomUUID(),
    events: { "http://schemas.openid.net/event/backchannel-logout": {} },
  };
  for (const name of ["sub", "sid", "nonce"]) if (query.get(name)) claims[name] = query.get(name);
  const key = await jose.importJWK(keys[0], "RS256");
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg: "RS256", kid: keys[0].kid, typ: "logout+jwt" })
    .sign(key);
}

// The login form: any user of USERS, with or without a second factor here.
function loginPage(uid) {
  return `<!doctype html><form method="post" action="/interaction/${uid}/login">
<input name="login"><input name="mfa" type="checkbox" value="1"><button>Sign in</button></form>`;
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString());
}

async function admin(req, res, url) {
  const send = (status, body) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (url.pathname === "/admin/rotate") {
    keys = [await newKey(), ...keys];
    provider = makeProvider();
    return send(200, { kid: keys[0].kid });
  }
  if (url.pathname === "/admin/tamper") {
    tamper = JSON.parse(await (await readForm(req)).get("change"));
    return send(200, {});
  }
  if (url.pathname === "/admin/logout-token") {
    return send(200, { logout_token: await logoutToken(url.searchParams) });
  }
  return send(404, {});
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  try {
    if (url.pathname.startsWith("/admin/")) {
      const local = ["127.0.0.1", "::1", "::ffff:127.0.0.1"].includes(req.socket.remoteAddress);
      if (!local) {
        res.writeHead(403).end();
        return;
      }
      await admin(req, res, url);
      return;
    }
    const interaction = url.pathname.match(/^\/interaction\/([^/]+)(\/login)?$/);
    if (interaction) {
      const details = await provider.interactionDetails(req, res);
      if (!interaction[2]) {
        res.writeHead(200, { "content-type": "text/html" });
        res.end(loginPage(details.uid));
        return;
      }
      const form = await readForm(req);
      const sub = form.get("login");
      if (!USERS[sub]) {
        res.writeHead(200, { "content-type": "text/html" });
        res.end(loginPage(details.uid));
        return;
      }
      const amr = form.get("mfa") ? ["pwd", "otp"] : ["pwd"];
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId: sub, amr, acr: form.get("mfa") ? "mfa" : "pwd" } },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    provider.callback()(req, res);
  } catch (error) {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end(String(error));
  }
});

server.listen(Number(port), "127.0.0.1", () => {
  console.log(`ready ${issuer}`);
});
