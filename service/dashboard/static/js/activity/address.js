// The address of one key's or one session's activity: the activity page with the API's filter of
// that name (`key_id`, `session_id`). The keys' and sessions' pages link there, as do the keys and
// sessions an event names.

export function activityHref(name, id) {
  return `/activity?${new URLSearchParams({ [name]: id })}`;
}
