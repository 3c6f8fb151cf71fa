// Passkeys in the browser: the API's options (JSON, binary fields in base64url) turned into
// what navigator.credentials.create() and get() take, and the credential they give back turned
// into the JSON the API verifies. Written here rather than with parseCreationOptionsFromJSON()
// and toJSON(), which not every browser has yet.

const PAD = "=";

// base64url text (no padding) -> ArrayBuffer.
export function fromBase64url(text) {
  const base64 = String(text).replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(base64 + PAD.repeat((4 - (base64.length % 4)) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index += 1) {
    bytes[index] = binary.charCodeAt(index);
  }
  return bytes.buffer;
}

// ArrayBuffer (or a view of one) -> base64url text, without padding.
export function toBase64url(buffer) {
  const bytes = buffer instanceof ArrayBuffer ? new Uint8Array(buffer) : new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  let binary = "";
  for (const byte of bytes) {
    binary += String.fromCharCode(byte);
  }
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function descriptors(list) {
  return (Array.isArray(list) ? list : []).map((item) => ({ ...item, id: fromBase64url(item.id) }));
}

// PublicKeyCredentialCreationOptions from their JSON form.
export function creationOptions(json) {
  const options = { ...json, challenge: fromBase64url(json.challenge), user: { ...json.user, id: fromBase64url(json.user.id) } };
  if (json.excludeCredentials) {
    options.excludeCredentials = descriptors(json.excludeCredentials);
  }
  return options;
}

// PublicKeyCredentialRequestOptions from their JSON form.
export function requestOptions(json) {
  const options = { ...json, challenge: fromBase64url(json.challenge) };
  if (json.allowCredentials) {
    options.allowCredentials = descriptors(json.allowCredentials);
  }
  return options;
}

function common(credential) {
  const json = {
    id: credential.id,
    rawId: toBase64url(credential.rawId),
    type: credential.type,
    clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {},
  };
  if (credential.authenticatorAttachment) {
    json.authenticatorAttachment = credential.authenticatorAttachment;
  }
  return json;
}

// A registration (navigator.credentials.create()'s answer) as JSON.
export function registrationJSON(credential) {
  const response = credential.response;
  return {
    ...common(credential),
    response: {
      clientDataJSON: toBase64url(response.clientDataJSON),
      attestationObject: toBase64url(response.attestationObject),
      transports: typeof response.getTransports === "function" ? response.getTransports() : [],
    },
  };
}

// An assertion (navigator.credentials.get()'s answer) as JSON.
export function assertionJSON(credential) {
  const response = credential.response;
  return {
    ...common(credential),
    response: {
      clientDataJSON: toBase64url(response.clientDataJSON),
      authenticatorData: toBase64url(response.authenticatorData),
      signature: toBase64url(response.signature),
      userHandle: response.userHandle ? toBase64url(response.userHandle) : null,
    },
  };
}

export function passkeysSupported() {
  return Boolean(window.PublicKeyCredential && navigator.credentials && window.isSecureContext);
}

// The browser's prompt to make a passkey for `optionsJSON`: the registration as JSON.
export async function createPasskey(optionsJSON) {
  const credential = await navigator.credentials.create({ publicKey: creationOptions(optionsJSON) });
  return registrationJSON(credential);
}

// The browser's prompt to use a passkey for `optionsJSON`: the assertion as JSON.
export async function usePasskey(optionsJSON) {
  const credential = await navigator.credentials.get({ publicKey: requestOptions(optionsJSON) });
  return assertionJSON(credential);
}

// What to say when the browser's prompt failed (a DOMException, not the API's refusal).
export function promptFailedText(error) {
  if (error && error.name === "NotAllowedError") {
    return "The passkey prompt was closed or timed out. Try again.";
  }
  if (error && error.name === "InvalidStateError") {
    return "This authenticator already holds a passkey for this account.";
  }
  if (error && error.name === "SecurityError") {
    return "The browser refused passkeys for this address: the service's public address must be the one in the address bar.";
  }
  return `The browser could not use a passkey${error && error.message ? `: ${error.message}` : "."}`;
}
