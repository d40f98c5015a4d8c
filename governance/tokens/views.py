"""The API token settings page: a user lists, creates and revokes their own tokens.

A new token's secret is rendered once, in the response to the POST that created it, and never
stored; the page then shows only its prefix.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from authority import access
from authority.models import Role, RoleGrant

from . import services as tokens

READ_ONLY = "read"


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="where the token is used, e.g. ci-pipeline")
    scope = forms.ChoiceField(help_text="one of your roles in one project, or read only")
    days = forms.TypedChoiceField(
        coerce=int,
        choices=[(d, f"{d} days") for d in tokens.LIFETIMES_DAYS],
        initial=tokens.DEFAULT_LIFETIME_DAYS,
        label="Expires after",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        grants = RoleGrant.objects.filter(user=user).select_related("project").order_by("project__slug", "role")
        self.grants = {f"{g.project_id}:{g.role}": (g.project, g.role) for g in grants}
        # an agent token of each project where the user may issue one (a lead or a reviewer)
        for g in grants:
            if g.role in access.AGENT_ISSUERS:
                self.grants.setdefault(f"{g.project_id}:{access.AGENT_SCOPE}", (g.project, access.AGENT_SCOPE))
        self.fields["scope"].choices = [(READ_ONLY, "read only, all your projects")] + [
            (key, f"{_scope_name(role)} in {project.slug}") for key, (project, role) in self.grants.items()
        ]


def _scope_name(role: str) -> str:
    if role == access.AGENT_SCOPE:
        return "Agent (select, write memory, report outcomes)"
    return Role(role).label


@login_required
def token_list(request, form: TokenForm | None = None, issued=None, status: int = 200):
    return render(
        request,
        "governance/api_tokens.html",
        {
            "tokens": [(t, tokens.scope_label(t)) for t in tokens.tokens_of(user=request.user)],
            "form": form or TokenForm(user=request.user),
            "issued": issued,
        },
        status=status,
    )


@login_required
@require_POST
def token_create(request):
    form = TokenForm(request.POST, user=request.user)
    if not form.is_valid():
        return token_list(request, form=form, status=400)
    grant = form.grants.get(form.cleaned_data["scope"])
    try:
        issued = tokens.token_create(
            user=request.user,
            name=form.cleaned_data["name"],
            project=grant[0] if grant else None,
            role=grant[1] if grant else None,
            days=form.cleaned_data["days"],
        )
    except (tokens.TokenRefused, access.AccessDenied) as error:
        form.add_error(None, str(error))
        return token_list(request, form=form, status=400)
    return token_list(request, issued=issued)


@login_required
@require_POST
def token_revoke(request, pk: int):
    try:
        token = tokens.token_revoke(user=request.user, token_id=pk)
    except tokens.TokenRefused as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Token {token.name} revoked.")
    return redirect("api-tokens")
