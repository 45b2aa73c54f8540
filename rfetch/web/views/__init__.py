"""The pages of the web UI, one module per page group. A view takes the request's
:class:`rfetch.web.action.Ctx` (and the route's values) and returns a response, or raises
:class:`rfetch.web.action.Redirect` after an action."""
